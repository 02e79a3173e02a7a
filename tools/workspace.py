"""The descriptor-pinned workspace and path resolution.

A ``Workspace`` holds an open descriptor on its root. Every path a tool is given
is workspace-relative, checked as text first (no ``..``, no absolute paths, no
backslashes, no NUL, bounded length), then authorized, then resolved segment by
segment from the root descriptor with ``O_NOFOLLOW``: a symlink anywhere on the
way refuses, and special files are opened non-blocking and refused.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

from tools.access import Access, AuthorizePath
from tools.refusal import RefusalCode, Refused

if TYPE_CHECKING:
    from tools.denylist import DenyList
    from tools.walls import Guard

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
PROTECTED_DIRS = frozenset({".git", ".bastion"})
EXCLUDED_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
SUPPORTED = (sys.platform.startswith("linux") or sys.platform == "darwin") and (
    os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
)

Identity = tuple[int, int]


class WorkspaceError(Exception):
    """The workspace cannot be opened (missing root, unsupported platform)."""


class RelPath(NamedTuple):
    """A checked workspace-relative path; ``parts == ()`` is the root."""

    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "/".join(self.parts) or "."

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else "."

    @property
    def parent(self) -> RelPath:
        return RelPath(self.parts[:-1])

    def child(self, name: str) -> RelPath:
        return RelPath((*self.parts, name))


def identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino)


def _bad(message: str, hint: str) -> Refused:
    return Refused(RefusalCode.INVALID_ARGUMENT, message, hint)


class Workspace:
    """An open, pinned workspace root. Use ``Workspace.open(path)``."""

    def __init__(self, fd: int, root: str) -> None:
        self._fd = fd
        self.root = root  # for relativizing absolute paths only; never re-opened
        self._aliases = {root, os.path.realpath(root)}
        self.identity = identity(os.fstat(fd))
        self.deny: DenyList | None = None  # the user's deny-list (set by ``open``)
        self.guard: Guard | None = None  # bastion's own folders, $HOME's start-up files

    @classmethod
    def open(
        cls, root: str | os.PathLike[str], deny: tuple[str, ...] = (), private: tuple[str, ...] = ()
    ) -> Workspace:
        """Open and pin ``root``; ``deny`` entries (``tools/denylist.py``) are refused
        to every tool and left out of listings and searches, and so are bastion's own
        folders ``private`` where the workspace holds them; the user's start-up files
        in it are never written (``tools/walls.py``)."""
        if not SUPPORTED:
            raise WorkspaceError(
                f"bastion tools need dir_fd support (Linux or macOS); {sys.platform} "
                "is refused rather than run without descriptor pinning"
            )
        text = os.path.abspath(os.fspath(root))
        try:
            fd = os.open(text, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise WorkspaceError(f"cannot open workspace {text}: {exc.strerror}") from None
        ws = cls(fd, text)
        if deny:
            from tools.denylist import DenyList

            ws.deny = DenyList(text, deny)
        from tools.walls import Guard

        ws.guard = Guard.of(text, private)
        return ws

    @property
    def fd(self) -> int:
        if self._fd < 0:
            raise Refused(RefusalCode.INTERNAL, "the workspace is closed")
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- text checks --------------------------------------------------------

    def parse(self, raw: Any, *, field: str = "path") -> RelPath:
        """Check a path as text, before any policy or open sees it."""
        if not isinstance(raw, str):
            raise _bad(
                f"{field} must be a string", "pass a workspace-relative path like 'src/app.py'"
            )
        if "\x00" in raw:
            raise _bad(f"{field} contains a NUL byte", "remove the NUL character")
        if "\\" in raw:
            raise _bad(
                f"{field} contains a backslash",
                "use '/' as the separator in workspace-relative paths",
            )
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            raise _bad(f"{field} is not valid Unicode", "spell the path in UTF-8") from None
        if size > MAX_PATH_BYTES:
            raise _bad(f"{field} is longer than {MAX_PATH_BYTES} bytes", "use a shorter path")
        if raw.startswith("/"):
            raise self._absolute(raw, field)
        if raw.startswith("~"):
            raise _bad(
                f"{field} starts with '~'",
                "home directories are outside the workspace; use a workspace-relative path",
            )
        parts = tuple(p for p in raw.split("/") if p not in ("", "."))
        for part in parts:
            if part == "..":
                raise _bad(
                    f"{field} contains '..'",
                    "paths cannot leave the workspace; "
                    "name the file relative to the workspace root",
                )
            if len(part.encode("utf-8")) > MAX_NAME_BYTES:
                raise _bad(
                    f"a name in {field} is longer than {MAX_NAME_BYTES} bytes",
                    "use a shorter file name",
                )
        return RelPath(parts)

    def _absolute(self, raw: str, field: str) -> Refused:
        for alias in sorted(self._aliases, key=len, reverse=True):
            if raw == alias or raw.startswith(alias.rstrip("/") + "/"):
                rel = raw[len(alias) :].strip("/") or "."
                if ".." not in rel.split("/"):
                    return _bad(f"{field} is absolute", f"use the workspace-relative path '{rel}'")
        return _bad(
            f"{field} is absolute and outside the workspace",
            "only paths inside the workspace can be used; give a relative path",
        )

    # -- policy -------------------------------------------------------------

    def authorize(self, rel: RelPath, access: Access, hook: AuthorizePath | None) -> None:
        """Refuse a denied path. Denial is recursive: ancestors are asked first."""
        entry = self.deny.match(rel.text) if self.deny is not None else None
        if entry is not None:
            raise Refused(
                RefusalCode.FORBIDDEN,
                f"'{rel.text}' is on the user's deny-list ({entry}); tools never open it",
                "leave it alone; if the task needs it, ask the user (they can edit "
                "deny_paths in their config.toml)",
            )
        if self.guard is not None:
            self.guard.refuse(rel.parts, rel.text, access is Access.WRITE)
        if access is Access.WRITE:
            for part in rel.parts:
                if part.casefold() in PROTECTED_DIRS:
                    raise Refused(
                        RefusalCode.FORBIDDEN,
                        f"'{rel.text}' is inside {part}/, which tools never write",
                        "write elsewhere; use run_command (e.g. git) for repository state",
                    )
        if hook is None:
            return
        for i in range(1, len(rel.parts) + 1):
            sub = "/".join(rel.parts[:i])
            if not ask(hook, sub, access):
                raise Refused(
                    RefusalCode.FORBIDDEN,
                    f"'{sub}' is not accessible for {access.value} (denied by policy)",
                    "choose a different path, or ask the user to allow this one",
                )

    # -- resolution -----------------------------------------------------------

    def open_dir(self, rel: RelPath) -> int:
        """Walk from the root without following links; the caller closes the fd."""
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(rel.parts):
                shown = "/".join(rel.parts[: i + 1])
                nxt = self._step_dir(fd, name, shown)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _step_dir(self, dir_fd: int, name: str, shown: str) -> int:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise classify(exc, dir_fd, name, shown, want_dir=True) from None
        try:
            check_case(dir_fd, name, os.fstat(fd), shown)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_file(self, rel: RelPath) -> tuple[int, os.stat_result]:
        """Open a regular file for reading; anything else refuses."""
        if not rel.parts:
            raise is_directory(rel.text)
        parent = self.open_dir(rel.parent)
        try:
            return open_regular(parent, rel.name, rel.text)
        finally:
            os.close(parent)

    @contextmanager
    def directory(self, rel: RelPath) -> Iterator[int]:
        fd = self.open_dir(rel)
        try:
            yield fd
        finally:
            os.close(fd)


def open_regular(parent: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise classify(exc, parent, name, shown, want_dir=False) from None
    try:
        st = os.fstat(fd)
        check_case(parent, name, st, shown)
        if stat.S_ISDIR(st.st_mode):
            raise is_directory(shown)
        if not stat.S_ISREG(st.st_mode):
            raise special_file(shown)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def visible(ws: Workspace, hook: AuthorizePath | None, path: str) -> bool:
    """Whether a listing or search may show workspace-relative ``path``: not
    deny-listed, and allowed for reading by the host hook (if any)."""
    if ws.deny is not None and ws.deny.match(path) is not None:
        return False
    if ws.guard is not None and ws.guard.hides(path):
        return False
    return hook is None or ask(hook, path, Access.READ)


def ask(hook: AuthorizePath, path: str, access: Access) -> bool:
    """Ask the host hook; a hook that fails denies (fail closed)."""
    try:
        return bool(hook(path, access))
    except Exception:
        return False


def is_directory(shown: str) -> Refused:
    return Refused(
        RefusalCode.INVALID_ARGUMENT,
        f"'{shown}' is a directory",
        "use list_directory or glob to see what it holds",
    )


def special_file(shown: str) -> Refused:
    return Refused(
        RefusalCode.FORBIDDEN,
        f"'{shown}' is not a regular file (FIFO, device or socket)",
        "only regular files can be read or written",
    )


def symlink(shown: str) -> Refused:
    return Refused(
        RefusalCode.FORBIDDEN,
        f"'{shown}' is a symbolic link; links are never followed",
        "use the path of the real file inside the workspace",
    )


def classify(exc: OSError, dir_fd: int, name: str, shown: str, *, want_dir: bool) -> Refused:
    """Turn an open failure into a refusal that names only workspace paths."""
    code = exc.errno
    if code == errno.ENOENT:
        return Refused(
            RefusalCode.NOT_FOUND,
            f"'{shown}' does not exist",
            "check the spelling with list_directory or glob",
        )
    if code in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            return symlink(shown)
        if want_dir and st is not None:
            return Refused(
                RefusalCode.INVALID_ARGUMENT,
                f"'{shown}' is not a directory",
                "name a directory here, or read the file with read_file",
            )
    if code in (errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
        return special_file(shown)
    if code in (errno.EACCES, errno.EPERM):
        return Refused(
            RefusalCode.FORBIDDEN,
            f"permission denied on '{shown}'",
            "choose a path the workspace user can access",
        )
    if code == errno.ENAMETOOLONG:
        return _bad(f"'{shown}' is too long", "use a shorter path")
    return Refused(
        RefusalCode.INTERNAL,
        f"cannot open '{shown}': {os.strerror(code or 0)}",
        "retry, or choose another path",
    )


def check_case(dir_fd: int, name: str, st: os.stat_result, shown: str) -> None:
    """On a case-insensitive volume, refuse a name spelled differently from disk."""
    alt = name.lower() if name.lower() != name else name.upper()
    if alt == name:
        return
    try:
        other = os.stat(alt, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if identity(other) != identity(st):
        return
    names = os.listdir(dir_fd)
    if name in names:
        return
    actual = next((n for n in names if n.casefold() == name.casefold()), None)
    hint = (
        f"use the exact spelling '{actual}'" if actual else "check the spelling with list_directory"
    )
    raise Refused(
        RefusalCode.FORBIDDEN,
        f"'{shown}' is spelled differently on disk (case-insensitive volume)",
        hint,
    )


def open_dir_creating(ws: Workspace, rel: RelPath, *, create: bool) -> tuple[int | None, list[str]]:
    """Walk to ``rel``; the directories missing on the way are returned as a plan.

    With ``create=False`` nothing is touched and the fd is None when something is
    missing. With ``create=True`` each missing directory is made with ``mkdirat``
    in its pinned parent and opened without following links.
    """
    fd = os.dup(ws.fd)
    missing: list[str] = []
    try:
        for i, name in enumerate(rel.parts):
            shown = "/".join(rel.parts[: i + 1])
            if missing and not create:
                missing.append(shown)
                continue
            try:
                nxt = ws._step_dir(fd, name, shown)
            except Refused as exc:
                if exc.refusal.code is not RefusalCode.NOT_FOUND:
                    raise
                missing.append(shown)
                if not create:
                    continue
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                except OSError as err:
                    raise classify(err, fd, name, shown, want_dir=True) from None
                nxt = ws._step_dir(fd, name, shown)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    if missing and not create:
        os.close(fd)
        return None, missing
    return fd, missing


def lookup(dir_fd: int, name: str) -> os.stat_result | None:
    """lstat a name in an open directory; None when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def resolve_plain(ws: Workspace, raw: str) -> tuple[str, ...] | None:
    """`raw` as segments when the text checks pass and no existing segment is a
    symlink or a special file on the way (what remains may not exist yet); else None."""
    try:
        rel = ws.parse(raw)
    except Refused:
        return None
    if not rel.parts:
        return None
    fd = os.dup(ws.fd)
    try:
        for i, name in enumerate(rel.parts):
            st = lookup(fd, name)
            if st is None:
                return rel.parts  # the rest will be created
            if stat.S_ISLNK(st.st_mode):
                return None
            if i == len(rel.parts) - 1:
                return rel.parts if stat.S_ISREG(st.st_mode) else None
            if not stat.S_ISDIR(st.st_mode):
                return None
            nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return rel.parts
    except OSError:
        return None
    finally:
        os.close(fd)
