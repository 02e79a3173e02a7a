"""What can be said about the database file when SQLite cannot use it, and by whom.

The store reports every failure to open or write its file through `explain`,
so the one line a person reads names the real cause and the fix:

- locked: another process held SQLite's write lock past the busy timeout; on
  Linux `/proc/locks` names that process (WAL mode: the write-lock byte of the
  `-shm` file; rollback mode: a write lock on the database itself); elsewhere
  a live process holding a conversation's lease is named as a likely suspect;
- read-only: the file, or the directory where SQLite must create it and its
  `-wal`/`-shm` companions, cannot be written;
- not a directory: BASTION_HOME (or one of its parents) is a file;
- disk full, corrupt or not a database, and anything else SQLite says.

`prepare_directory` and `check_writable` refuse the first three before SQLite
is asked, so nothing is created or changed when they fail.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import sqlite3
import stat
import time
from pathlib import Path

from runtime.model.errors import (
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreLocked,
    StoreReadOnly,
)
from runtime.store import migrations

__all__ = [
    "check_writable",
    "explain",
    "live_drivers",
    "lock_holder",
    "make_private",
    "prepare_directory",
    "prepare_file",
    "store_modes",
]

_HOME_HINT = "set BASTION_HOME to a writable directory"
#: The byte of the `-shm` file a WAL writer locks (WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK).
_WAL_WRITE_LOCK_BYTE = 120


def prepare_directory(path: Path) -> None:
    """Create the directory that holds `path` (0700), or say why it cannot be."""
    parent = path.parent
    try:
        parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _file_in_the_way(parent)
        raise StoreError(
            f"{blocker} is a file, not a directory, so the database {path} cannot be kept there",
            hint="set BASTION_HOME to a directory (bastion keeps bastion.sqlite in it)",
        ) from None
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise StoreReadOnly(
                f"cannot create {parent}: {_read_only_why(exc)}", hint=_HOME_HINT
            ) from None
        raise StoreError(
            f"cannot create {parent}: {exc.strerror or exc}", hint=_HOME_HINT
        ) from None


def make_private(path: Path) -> None:
    """The store is the user's alone: its folder 0700, the database and its -wal/-shm
    0600 (created so when new; an existing store's modes are tightened on open).

    The folder is tightened only when it is this user's and not a shared sticky
    folder such as /tmp (BASTION_HOME=/tmp must not close /tmp to everyone)."""
    parent = path.parent
    st = os.stat(parent)
    if st.st_uid == os.getuid() and not st.st_mode & stat.S_ISVTX and st.st_mode & 0o077:
        os.chmod(parent, stat.S_IMODE(st.st_mode) & 0o700)
    if not path.exists():
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for file in (path, *_companions(path)):
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.stat(file).st_mode)
            if mode & 0o077:
                os.chmod(file, mode & 0o700)


def store_modes(path: Path) -> list[tuple[Path, int, int]]:
    """(file, its mode, the most it should be) for the store's folder and files that
    exist: what `bastion doctor` reports."""
    out = []
    for file, most in (
        (path.parent, 0o700),
        (path, 0o600),
        *((c, 0o600) for c in _companions(path)),
    ):
        with contextlib.suppress(FileNotFoundError):
            out.append((file, stat.S_IMODE(os.stat(file).st_mode), most))
    return out


def prepare_file(path: Path, busy_ms: int, page_size: int) -> None:
    """Create or migrate the file synchronously, refusing what this build cannot use.

    A home that is a file or read-only is refused before SQLite is asked, so
    nothing is created. A file already at the latest schema is only read, so
    opening never waits for another process's write lock.

    Processes opening a new file at once can meet SQLite's deadlock rule: two
    that both read the file and then both want it for writing (to switch it to
    WAL, say) are refused at once, without the busy timeout's wait. So a refusal
    is tried again, from the top, until `busy_ms` has passed: every step here can
    be repeated (the migrations read the version again in each transaction).
    """
    prepare_directory(path)
    check_writable(path)
    try:
        make_private(path)
    except OSError as exc:
        raise StoreError(
            f"cannot make {path} private to you: {exc.strerror or exc}",
            hint="check who owns it (chmod 600 it), or set BASTION_HOME",
        ) from None
    started = time.monotonic()
    while True:
        try:
            _prepare_once(path, busy_ms, page_size)
            return
        except sqlite3.Error as exc:
            waited = time.monotonic() - started
            if not _refused_for_a_lock(exc) or waited * 1000 >= busy_ms:
                raise explain(path, exc, waited=round(waited, 1)) from exc
            time.sleep(random.uniform(0.005, 0.025))  # (apart, so they do not meet again)


def _refused_for_a_lock(exc: sqlite3.Error) -> bool:
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(exc)


def _prepare_once(path: Path, busy_ms: int, page_size: int) -> None:
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_ms / 1000)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise StoreError(
                f"{path} is an SQLite file but not a Bastion database",
                hint="point BASTION_HOME at another directory",
            )
        version = migrations.current_version(db) if "meta" in tables else 0
        latest = migrations.latest_version()
        if version > latest:
            raise SchemaTooNew(
                f"{path} has schema version {version}, newer than this bastion knows ({latest})",
                hint="upgrade bastion (pip install -U bastion); the file was not changed",
            )
        if not tables:
            # A new file: 16 KiB pages pack a streamed answer of a few KiB with its
            # neighbours (on 4 KiB pages each one took a page of its own).
            db.execute(f"PRAGMA page_size={page_size}")
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise StoreError(
                f"{path}: cannot switch to WAL journal mode",
                hint="put BASTION_HOME on a local filesystem",
            )
        if version < latest:
            # As the store's own connections write (runtime.store.threads): in WAL
            # mode a commit is atomic without its own fsync, and a migration lost to
            # a power cut is applied again at the next open. A new file's eleven
            # migrations otherwise took eleven fsyncs (50-130 ms on a busy disk).
            db.execute("PRAGMA synchronous=NORMAL")
            migrations.ensure_meta(db)
            migrations.apply_pending(db)
    finally:
        db.close()


def _file_in_the_way(directory: Path) -> Path:
    """The nearest ancestor of `directory` (itself included) that exists and is not a directory."""
    for candidate in (directory, *directory.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate if not candidate.is_dir() else directory
    return directory


def _read_only_why(exc: OSError) -> str:
    return "read-only file system" if exc.errno == errno.EROFS else "permission denied (read-only)"


def _companions(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def check_writable(path: Path) -> None:
    """Refuse, by name, a database that SQLite could open but never write.

    The file must be a writable regular file; the directory must be writable
    when SQLite has to create something in it (the file, or its -wal and -shm).
    """
    parent = path.parent
    if path.exists():
        if not path.is_file():
            raise StoreError(
                f"{path} is not a file (the database must be one)",
                hint="move it aside or set BASTION_HOME to another directory",
            )
        if not os.access(path, os.R_OK | os.W_OK):
            if not os.access(parent, os.W_OK | os.X_OK):
                raise StoreReadOnly(
                    f"{parent} is read-only: the database {path.name} in it cannot be written",
                    hint=_HOME_HINT,
                )
            raise StoreReadOnly(
                f"the database {path} is read-only",
                hint=f"make it writable (chmod u+rw {path}) or {_HOME_HINT}",
            )
        must_create = not all(p.exists() for p in _companions(path))
    else:
        must_create = True
    if must_create and not os.access(parent, os.W_OK | os.X_OK):
        what = "its journal files" if path.exists() else "the database"
        raise StoreReadOnly(f"{parent} is read-only: cannot create {what} there", hint=_HOME_HINT)


def explain(path: Path, exc: sqlite3.Error, *, waited: float) -> StoreError:
    """The StoreError saying what `exc` (met using `path`) means, and what to do.

    `waited` is the busy timeout in seconds, named when the file stayed locked.
    """
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = str(exc)
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in text:
        return _locked(path, waited)
    if primary == sqlite3.SQLITE_READONLY or "readonly database" in text:
        return StoreReadOnly(f"the database {path} is read-only ({text})", hint=_HOME_HINT)
    if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return StoreReadOnly(f"{path.parent} is read-only ({text})", hint=_HOME_HINT)
        return StoreError(
            f"cannot open the database {path} ({text})",
            hint="check the path and its permissions, or set BASTION_HOME",
        )
    if primary == sqlite3.SQLITE_FULL or "database or disk is full" in text:
        return StoreFull(
            f"the disk holding {path} is full", hint="free some space; that step was not saved"
        )
    if primary == sqlite3.SQLITE_IOERR or "disk I/O error" in text:
        return StoreIOError(
            f"the disk holding {path} failed to read or write ({text})",
            hint="check that disk; that step was not saved",
        )
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreCorrupt(
            f"{path} is corrupt or not a database ({text})",
            hint="move the file aside (nothing was changed) and run bastion again",
        )
    return StoreError(f"database error in {path}: {text}", hint="that step was not saved")


def _locked(path: Path, waited: float) -> StoreLocked:
    pid = lock_holder(path)
    if pid is not None:
        who = f"pid {pid}{_command(pid)}"
        hint = f"wait for pid {pid} to finish, or stop it, then try again"
    else:
        drivers = live_drivers(path)
        who = "another process"
        if len(drivers) == 1:
            who += f" (pid {drivers[0]} is driving a conversation in it)"
        hint = f"try again; if it persists, find the process with `fuser {path}*`"
    return StoreLocked(
        f"the database {path} is locked by {who} (waited {waited:g} s)", pid=pid, hint=hint
    )


def live_drivers(path: Path) -> list[int]:
    """Pids of other live processes holding a conversation's lease in `path` (a hint only:
    used where /proc/locks cannot say who holds the lock). Read without waiting."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0)
    except sqlite3.Error:
        return []
    try:
        rows = db.execute(
            "SELECT DISTINCT lease_pid FROM conversations WHERE lease_pid IS NOT NULL"
        ).fetchall()
    except sqlite3.Error:
        return []
    finally:
        db.close()
    return sorted(pid for (pid,) in rows if pid != os.getpid() and pid_alive(pid))


def pid_alive(pid: int) -> bool:
    """Is there a running process `pid` on this host (ours to signal or not)? A zombie
    (killed, not yet reaped by its parent) is not: it holds nothing and never will."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_state(pid) not in ("Z", "X")


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (Linux); None if unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw.rpartition(b")")[2].decode("ascii", "replace").split()


def process_state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, D, Z, …) where /proc says it; else None."""
    fields = _proc_stat(pid)
    return fields[0] if fields else None


def process_started(pid: int) -> float | None:
    """When `pid` started, in epoch seconds (to about a second: the boot time is whole
    seconds), where /proc says it (Linux); else None."""
    fields = _proc_stat(pid)
    if not fields or len(fields) < 20:
        return None
    try:
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text(encoding="ascii").splitlines()
            if line.startswith("btime ")
        )
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def _command(pid: int) -> str:
    try:
        name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return f" ({name})" if name else ""


def lock_holder(path: Path, locks: str | None = None) -> int | None:
    """The pid holding SQLite's write lock on `path`, from /proc/locks; None if unknown.

    Best effort and Linux only: `locks` is the text of /proc/locks (read when
    None). Waiters (`->` lines) and this process are skipped.
    """
    inodes: dict[int, bool] = {}  # inode -> is the -shm file
    for candidate, is_shm in ((path, False), (_companions(path)[1], True)):
        with contextlib.suppress(OSError):
            inodes[os.stat(candidate).st_ino] = is_shm
    if not inodes:
        return None
    if locks is None:
        try:
            locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
    for line in locks.splitlines():
        pid = _writer(line, inodes)
        if pid is not None and pid != os.getpid():
            return pid
    return None


def _writer(line: str, inodes: dict[int, bool]) -> int | None:
    """The pid of a /proc/locks line that is a write lock SQLite's writer would hold."""
    fields = line.split()
    if len(fields) < 8 or fields[1] == "->" or fields[3] != "WRITE":
        return None
    try:
        pid = int(fields[4])
        inode = int(fields[5].rsplit(":", 1)[1])
        start = int(fields[6])
        end = None if fields[7] == "EOF" else int(fields[7])
    except (ValueError, IndexError):
        return None
    if inode not in inodes or pid <= 0:
        return None
    if inodes[inode] and not (
        start <= _WAL_WRITE_LOCK_BYTE and (end is None or end >= _WAL_WRITE_LOCK_BYTE)
    ):
        return None  # a lock on the -shm file other than the writer's byte
    return pid
