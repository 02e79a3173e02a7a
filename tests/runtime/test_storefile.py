"""Opening and writing the store: each failure says what it is (locked, read-only, not a
directory, corrupt), and opening a current database never waits for a writer."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.model.errors import StoreCorrupt, StoreError, StoreLocked, StoreReadOnly
from runtime.store import migrations, storefile
from runtime.store.database import Store

HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("CREATE TABLE IF NOT EXISTS held (x)")
print("held", flush=True)
time.sleep(60)  # (the thing under test: a process holding the lock; killed at the end)
"""


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "bastion.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.close()
    return path


@pytest.fixture
def held(database: Path) -> Iterator[int]:
    """Another process holding the write lock of `database`; yields its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(database)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc.pid
    proc.kill()
    proc.wait()


def locked_error(database: Path) -> sqlite3.Error:
    db = sqlite3.connect(database, isolation_level=None, timeout=0)
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        return exc
    finally:
        db.close()
    raise AssertionError("the database was not locked")


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")
def test_a_locked_database_names_the_pid_holding_it(database: Path, held: int) -> None:
    assert storefile.lock_holder(database) == held
    error = storefile.explain(database, locked_error(database), waited=10)
    assert isinstance(error, StoreLocked) and error.pid == held
    line = str(error)
    assert f"locked by pid {held} (python" in line and "waited 10 s" in line
    assert "corrupt" not in line


def test_without_proc_locks_a_lock_is_still_called_a_lock(database: Path, held: int) -> None:
    error = storefile.explain(database, locked_error(database), waited=0.5)
    assert isinstance(error, StoreLocked)
    assert storefile.lock_holder(database, locks="") is None


def test_lock_lines_that_are_not_the_writer_are_ignored(database: Path) -> None:
    shm = database.with_name(database.name + "-shm")
    shm.write_bytes(b"\0" * 32768)
    db_ino, shm_ino = database.stat().st_ino, shm.stat().st_ino
    lines = {
        f"1: POSIX  ADVISORY  READ 4001 00:2d:{shm_ino} 120 120": None,  # shared, not a writer
        f"1: POSIX  ADVISORY  WRITE 4002 00:2d:{shm_ino} 128 128": None,  # another byte
        f"1: -> POSIX  ADVISORY  WRITE 4003 00:2d:{shm_ino} 120 120": None,  # a waiter
        f"1: POSIX  ADVISORY  WRITE {os.getpid()} 00:2d:{shm_ino} 120 120": None,  # this process
        f"1: POSIX  ADVISORY  WRITE 4004 00:2d:{shm_ino + 1} 120 120": None,  # another file
        f"1: POSIX  ADVISORY  WRITE 4005 00:2d:{shm_ino} 120 120": 4005,
        f"1: POSIX  ADVISORY  WRITE 4006 00:2d:{shm_ino} 100 EOF": 4006,
        f"1: POSIX  ADVISORY  WRITE 4007 fe:00:{db_ino} 1073741825 1073741825": 4007,
        "garbage": None,
    }
    for line, pid in lines.items():
        assert storefile.lock_holder(database, locks=line) == pid, line


async def test_opening_a_current_database_does_not_wait_for_a_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "home" / "bastion.sqlite"
    store = await Store.open(path)
    await store.close()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        started = time.monotonic()
        store = await Store.open(path)  # used to wait 10 s, then call the file corrupt
        await store.close()
        assert time.monotonic() - started < 5
    finally:
        proc.kill()
        proc.wait()


RACER = """
import sys, time
from pathlib import Path
from runtime.store import migrations, storefile
from runtime.store.sqlite_engine import BUSY_TIMEOUT_MS, PAGE_SIZE
go = Path(sys.argv[1])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.002)  # (bounded: all start together once the file appears)
for path in sys.argv[2:]:
    storefile.prepare_file(Path(path), BUSY_TIMEOUT_MS, PAGE_SIZE)
"""


def test_processes_creating_one_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    """SQLite refuses at once (no busy wait) two readers that both want to write, as
    processes switching a new file to WAL do; each used to fail with "locked (waited
    10 s)" after a few milliseconds, one in five rounds of eight."""
    go = tmp_path / "go"
    paths = [str(tmp_path / f"home{i}" / "bastion.sqlite") for i in range(12)]
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(go), *paths],
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parents[2],
        )
        for _ in range(8)
    ]
    go.touch()
    errors = [racer.communicate(timeout=120)[1] for racer in racers]
    assert [racer.returncode for racer in racers] == [0] * 8, errors
    for path in paths:
        with sqlite3.connect(path) as db:
            versions = [v for (v,) in db.execute("SELECT version FROM migrations")]
        assert versions == sorted(set(versions)) and len(versions) == migrations.latest_version()


def test_a_migration_kept_waiting_names_the_holder_and_the_real_wait(tmp_path: Path) -> None:
    path = tmp_path / "home" / "bastion.sqlite"
    path.parent.mkdir()
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode=WAL")
        migrations.ensure_meta(db)  # (an old file: no migration applied yet)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        started = time.monotonic()
        with pytest.raises(StoreLocked) as caught:
            storefile.prepare_file(path, 300, 4096)
        assert 0.3 <= time.monotonic() - started < 5
        assert "(waited 0.3 s)" in str(caught.value) or "(waited 0.4 s)" in str(caught.value)
    finally:
        proc.kill()
        proc.wait()


async def test_a_home_that_is_a_file_is_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    for path in (home / "bastion.sqlite", home / "deeper" / "bastion.sqlite"):
        with pytest.raises(StoreError) as caught:
            await Store.open(path)
        assert str(caught.value).startswith(f"{home} is a file, not a directory")
        assert "BASTION_HOME" in str(caught.value)
    assert home.read_text() == "not a directory"


async def test_a_database_path_that_is_a_directory_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bastion.sqlite"
    path.mkdir()
    with pytest.raises(StoreError, match="is not a file"):
        await Store.open(path)


def test_read_only_file_and_directory_are_called_read_only(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.access decides (root passes any permission bits, so it is stubbed here)."""
    denied: set[Path] = set()
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) not in denied)
    denied.add(database)
    with pytest.raises(StoreReadOnly, match=r"the database .* is read-only"):
        storefile.check_writable(database)
    denied.add(database.parent)
    with pytest.raises(StoreReadOnly, match=r"home is read-only: the database bastion\.sqlite in"):
        storefile.check_writable(database)
    denied.remove(database)
    with pytest.raises(StoreReadOnly, match="is read-only: cannot create the database there"):
        storefile.check_writable(database.with_name("new.sqlite"))
    with pytest.raises(StoreReadOnly, match="is read-only: cannot create its journal files"):
        storefile.check_writable(database)
    for suffix in ("-wal", "-shm"):
        database.with_name(database.name + suffix).write_bytes(b"")
    storefile.check_writable(database)  # nothing to create: a read-only directory will do


def test_sqlite_errors_are_named_by_their_code(database: Path, tmp_path: Path) -> None:
    ro = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        ro.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as exc:
        assert isinstance(storefile.explain(database, exc, waited=1), StoreReadOnly)
    else:
        raise AssertionError("a read-only connection wrote")
    finally:
        ro.close()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00garbage" * 1000)
    db = sqlite3.connect(junk)
    try:
        db.execute("SELECT * FROM sqlite_master")
    except sqlite3.Error as exc:
        error = storefile.explain(junk, exc, waited=1)
        assert isinstance(error, StoreCorrupt) and "corrupt" in str(error)
    else:
        raise AssertionError("garbage read as a database")
    finally:
        db.close()


def test_without_proc_locks_a_live_lease_holder_is_named_as_the_suspect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bastion.sqlite"
    # (a live process, killed at the end: the thing under test is that it is alive)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("CREATE TABLE conversations (id TEXT, lease_pid INTEGER)")
        rows = [("a", sleeper.pid), ("b", dead.pid), ("c", os.getpid()), ("d", None)]
        db.executemany("INSERT INTO conversations VALUES (?, ?)", rows)
        db.close()
        assert storefile.live_drivers(path) == [sleeper.pid]
        monkeypatch.setattr(storefile, "lock_holder", lambda p: None)
        error = storefile.explain(path, sqlite3.OperationalError("database is locked"), waited=10)
        assert isinstance(error, StoreLocked) and error.pid is None
        assert f"locked by another process (pid {sleeper.pid} is driving" in str(error)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_no_suspect_is_named_from_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    assert storefile.live_drivers(tmp_path / "missing.sqlite") == []
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"\x00garbage" * 1000)
    assert storefile.live_drivers(junk) == []
