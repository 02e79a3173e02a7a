"""The Linux half of the command sandbox: a private mount namespace and Landlock,
applied by the command supervisor (``tools/reaper.py``) to itself just before it
starts the command, so the command and everything it starts inherit them.

This module is imported by the supervisor by file path (it runs with
``python -I -S`` and never imports the ``tools`` package), so it uses the
standard library only, and little of it: ctypes and os.

Two layers, because Landlock grants are additive and hierarchical (a writable
workspace cannot have a read-only ``.bastion/`` carved out of it, nor can
``~/.ssh`` be hidden from a readable ``/``):

1. ``private_mounts``: ``unshare(CLONE_NEWNS)`` (with ``CLONE_NEWUSER`` and an
   identity uid/gid map when not root; with ``CLONE_NEWNET`` when network is
   off), then protected paths are bind-mounted read-only over themselves and
   deny-listed paths are covered (an empty read-only tmpfs over a folder,
   ``/dev/null`` over a file).
2. ``restrict``: a Landlock ruleset that handles every write access and allows
   it only beneath the writable roots (plus ``/dev/null``-like files), and, with
   ABI 4 or later and network off, denies TCP bind and connect.

The spec comes from bastion as ``key:value`` strings (see ``tools/sandbox.py``):
``mode:``, ``w:DIR`` writable root, ``f:FILE`` writable file, ``ro:PATH``
read-only, ``pin:PATH`` kept where it is (bound over itself, still writable: a
mount point cannot be renamed, replaced or removed, so what is protected inside
it cannot be moved aside), ``hd:DIR``/``hf:FILE`` hidden (a file by binding the
empty file ``empty:FILE`` over it), ``net:0|1``, ``ns:0|1`` (make a namespace).
"""

from __future__ import annotations

import ctypes
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_*
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

WRITES_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)
FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
KEPT_FLAGS = 1 | 2 | 4 | 8 | 1024 | 2048 | 4096  # ro, nosuid, nodev, noexec, *atime


class SandboxError(Exception):
    """The sandbox could not be applied; the command must not run."""


class RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc: Any = None


def libc() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def fail(what: str) -> SandboxError:
    err = ctypes.get_errno()
    return SandboxError(f"{what}: {os.strerror(err)} (errno {err})")


def abi() -> int:
    """The Landlock ABI version this kernel offers; 0 if none (or not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = libc().syscall(
            SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION
        )
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def write_rights(version: int) -> int:
    rights = WRITES_V1
    if version >= 2:
        rights |= FS_REFER
    if version >= 3:
        rights |= FS_TRUNCATE
    return rights


def restrict(dirs: list[str], files: list[str], network: bool, version: int) -> list[str]:
    """Landlock this process (and so all it starts): writes only beneath ``dirs``
    and to ``files``; TCP bind/connect denied unless ``network`` (ABI >= 4).
    Returns notes on what was not covered. Raises SandboxError."""
    if version < 1:
        raise SandboxError("this kernel has no Landlock")
    notes: list[str] = []
    handled = write_rights(version)
    attr = RulesetAttr(handled, 0, 0)
    size = 8
    if not network:
        if version >= 4:
            attr.handled_access_net, size = NET_BIND_TCP | NET_CONNECT_TCP, 16
        else:
            notes.append(f"Landlock ABI {version} cannot restrict TCP (4 is needed)")
        if version >= 6:
            attr.scoped, size = SCOPE_ABSTRACT_UNIX, 24
    ruleset = libc().syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise fail("landlock_create_ruleset")
    try:
        for path in dirs:
            add_path(ruleset, path, handled, notes)
        for path in files:
            add_path(ruleset, path, handled & FILE_RIGHTS, notes)
        if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc().syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return notes


def add_path(ruleset: int, path: str, rights: int, notes: list[str]) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        notes.append(f"writable path {path} skipped: {exc.strerror}")
        return
    try:
        rule = PathBeneathAttr(rights, fd)
        if libc().syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise fail(f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else os.fsencode(s)

    ok = libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    if ok != 0:
        raise fail(f"mount {target}")


def enter_namespace(network: bool) -> None:
    """A private mount namespace (and net namespace when network is off); a user
    namespace with an identity map first when not root."""
    flags = CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        flags |= CLONE_NEWUSER
    if libc().unshare(flags) != 0:
        raise fail("unshare")
    if uid != 0:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)


def pin(path: str) -> None:
    """Bind ``path`` over itself, writable as before: as a mount point it can no
    longer be renamed, replaced or removed (EBUSY), so a protected path inside it
    cannot be moved aside and planted again."""
    mount(path, path, None, MS_BIND | MS_REC, None)


def read_only(path: str) -> None:
    """Bind ``path`` over itself read-only, keeping the flags a user namespace
    would refuse to drop."""
    mount(path, path, None, MS_BIND | MS_REC, None)
    kept = os.statvfs(path).f_flag & KEPT_FLAGS
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, None)


def hide(path: str, empty: str | None) -> None:
    """Cover a folder with an empty read-only tmpfs, or a file with the empty file
    ``empty`` bound read-only (reads find nothing, writes fail)."""
    if empty is None:
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY
        mount("tmpfs", path, "tmpfs", flags, "size=4k,mode=0555")
    else:
        mount(empty, path, None, MS_BIND, None)
        kept = os.statvfs(path).f_flag & KEPT_FLAGS
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, None)


def private_mounts(spec: dict[str, list[str]], network: bool) -> None:
    enter_namespace(network)
    for path in spec.get("pin", ()):
        pin(path)
    for path in spec.get("ro", ()):
        read_only(path)
    for path in spec.get("hd", ()):
        hide(path, None)
    empty = spec.get("empty", ["/dev/null"])[0]
    for path in spec.get("hf", ()):
        hide(path, empty)


def parse(entries: list[str]) -> dict[str, list[str]]:
    spec: dict[str, list[str]] = {}
    for entry in entries:
        key, _, value = entry.partition(":")
        spec.setdefault(key, []).append(value)
    return spec


def apply(entries: list[str]) -> dict[str, Any]:
    """Apply the sandbox of ``entries`` to this process; returns what was applied
    (``mode``, ``landlock`` ABI, ``namespace``, ``network``, ``notes``). Raises
    SandboxError when a required part cannot be applied."""
    spec = parse(entries)
    mode = spec.get("mode", ["workspace-write"])[0]
    network = spec.get("net", ["0"])[0] == "1"
    report: dict[str, Any] = {"mode": mode, "network": network, "namespace": False, "notes": []}
    if mode == "danger-full-access":
        report["landlock"] = 0
        return report
    notes: list[str] = report["notes"]
    if spec.get("ns", ["0"])[0] == "1":
        private_mounts(spec, network)
        report["namespace"] = True
    else:
        hidden = len(spec.get("hd", ())) + len(spec.get("hf", ())) + len(spec.get("ro", ()))
        if hidden:
            notes.append("no mount namespace: protected and deny-listed paths are not covered")
    version = abi()
    dirs = spec.get("w", []) if mode == "workspace-write" else []
    notes += restrict(dirs, spec.get("f", []), network, version)
    report["landlock"] = version
    return report


def probe_namespace() -> str:
    """'' if a private mount namespace can be made here (tried in a child), else why."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        code = 0
        try:
            enter_namespace(network=False)
        except (SandboxError, OSError):
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return ""
    return "unshare(CLONE_NEWNS) is not permitted here (user namespaces disabled?)"


if __name__ == "__main__":  # ``python -I -S landlock.py``: print what this kernel offers
    reason = probe_namespace() if sys.platform.startswith("linux") else "not Linux"
    sys.stdout.write(f"{abi()}\n{reason}\n")
