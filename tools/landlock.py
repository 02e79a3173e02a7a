"""The Linux half of the command sandbox: a private mount namespace and Landlock,
applied by the command supervisor (``tools/reaper.py``) to itself just before it
starts the command, so the command and everything it starts inherit them.

This module is imported by the supervisor by file path (it runs with
``python -I -S`` and never imports the ``tools`` package), so it uses the
standard library only, and little of it: ctypes and os.

Two layers, because Landlock grants are additive and hierarchical (a writable
workspace cannot have a read-only ``.bastion/`` carved out of it, nor can
``~/.ssh`` be hidden from a readable ``/``):

1. ``private_mounts``: ``unshare(CLONE_NEWNS | CLONE_NEWPID)`` (with
   ``CLONE_NEWUSER`` and an identity uid/gid map when not root; with
   ``CLONE_NEWNET`` when network is off), then protected paths are bind-mounted
   read-only over themselves, folders that must not gain new entries are sealed,
   every Unix socket listening at the start is covered, and deny-listed and
   private paths are covered (an empty read-only tmpfs over a folder, an empty
   read-only file over a file or socket).
2. ``start_init``: the PID namespace's PID 1, a fork of the supervisor that
   mounts a fresh ``/proc`` and then only reaps orphans until the supervisor
   ends, so the command sees (and can signal) nothing but its own processes.
3. ``restrict``: a Landlock ruleset that handles every write access and allows
   it only beneath the writable roots (plus ``/dev/null``-like files), and, with
   ABI 4 or later and network off, denies TCP bind and connect; with ABI 6 or
   later it scopes signals and abstract Unix sockets to the sandbox.

The spec comes from bastion as ``key:value`` strings (see ``tools/sandbox.py``):
``mode:``, ``w:DIR`` writable root, ``f:FILE`` writable file, ``ro:PATH``
read-only, ``pin:PATH`` kept where it is (bound over itself, still writable: a
mount point cannot be renamed, replaced or removed, so what is protected inside
it cannot be moved aside), ``hd:DIR``/``hf:FILE`` hidden (a file by binding the
empty file ``empty:FILE`` over it), ``net:0|1``, ``ns:0|1`` (make a namespace),
``proxy:SOCKET`` (network off but for the allow-list: a bridge in the command's
network namespace to bastion's proxy at SOCKET, ``tools/bridge.py``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
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
CLONE_NEWPID = 0x20000000
SOCK_DGRAM, SO_ACCEPTCON = 2, 1 << 16  # /proc/net/unix: Type, and the listening Flag
MAX_SEALED_ENTRIES = 4096
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


class NetPortAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


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


def restrict(
    dirs: list[str],
    files: list[str],
    network: bool,
    version: int,
    pid_namespace: bool = False,
    proxy_port: int = 0,
) -> list[str]:
    """Landlock this process (and so all it starts): writes only beneath ``dirs``
    and to ``files``; TCP bind/connect denied unless ``network`` (ABI >= 4), but
    connect to ``proxy_port`` (the allow-list's bridge, ``tools/bridge.py``); signals
    and abstract Unix sockets scoped to the sandbox (ABI >= 6). Returns notes on
    what was not covered. Raises SandboxError."""
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
        attr.scoped, size = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL, 24
    else:
        notes += unscoped(version, network, pid_namespace)
    ruleset = libc().syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise fail("landlock_create_ruleset")
    try:
        for path in dirs:
            add_path(ruleset, path, handled, notes)
        for path in files:
            add_path(ruleset, path, handled & FILE_RIGHTS, notes)
        if proxy_port and attr.handled_access_net:
            rule = NetPortAttr(NET_CONNECT_TCP, proxy_port)
            if libc().syscall(SYS_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), 0) != 0:
                raise fail(f"landlock_add_rule(port {proxy_port})")
        if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc().syscall(SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return notes


def unscoped(version: int, network: bool, pid_namespace: bool) -> list[str]:
    """What Landlock below ABI 6 leaves open (the namespaces close the rest)."""
    notes = []
    if network:  # (with the network off, the command's own net namespace has none)
        notes.append(
            f"Landlock ABI {version} cannot scope abstract Unix sockets (6 is needed): "
            "with the network on, the command can reach X11's @/tmp/.X11-unix and the like"
        )
    if not pid_namespace:
        notes.append(
            f"Landlock ABI {version} cannot scope signals (6 is needed) and there is no "
            "PID namespace: the command can signal the user's other processes"
        )
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


def enter_namespace(network: bool, pid: bool = True) -> bool:
    """A private mount namespace (and net namespace when network is off); a user
    namespace with an identity map first when not root; a PID namespace too when
    ``pid`` and the kernel allows it (True then: the next child forked is its PID 1)."""
    flags = CLONE_NEWNS | (0 if network else CLONE_NEWNET)
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0:
        flags |= CLONE_NEWUSER
    made_pid = pid and libc().unshare(flags | CLONE_NEWPID) == 0
    if not made_pid and libc().unshare(flags) != 0:
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
    return made_pid


def pin(path: str) -> None:
    """Bind ``path`` over itself, writable as before: as a mount point it can no
    longer be renamed, replaced or removed (EBUSY), so a protected path inside it
    cannot be moved aside and planted again."""
    mount(path, path, None, MS_BIND | MS_REC, None)


def read_only(path: str) -> None:
    """Bind ``path`` over itself read-only, keeping the flags a user namespace
    would refuse to drop."""
    mount(path, path, None, MS_BIND | MS_REC, None)
    remount_read_only(path)


def remount_read_only(path: str) -> None:
    kept = os.statvfs(path).f_flag & KEPT_FLAGS
    mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, None)


def seal(path: str, skip: set[str], notes: list[str]) -> None:
    """No new entry can be made in folder ``path``, and none of its entries renamed
    or removed, while what they hold stays writable: the folder is bound over
    itself, each folder and regular file in it bound back over itself (as the
    folder's bind is still writable, so each inherits writable flags), and only
    then the folder's own bind is made read-only. Links and entries in ``skip``
    (protected or hidden on their own) stay in the read-only bind."""
    mount(path, path, None, MS_BIND | MS_REC, None)
    bound = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.path in skip or entry.is_symlink():
                continue
            if not (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)):
                continue
            if bound >= MAX_SEALED_ENTRIES:
                notes.append(
                    f"{path} holds more than {MAX_SEALED_ENTRIES} entries: the rest are "
                    "read-only to commands"
                )
                break
            mount(entry.path, entry.path, None, MS_BIND | MS_REC, None)
            bound += 1
    remount_read_only(path)


def hide(path: str, empty: str | None) -> None:
    """Cover a folder with an empty read-only tmpfs, or a file (or socket) with the
    empty file ``empty`` bound read-only (reads find nothing, writes fail, and a
    connect is refused: it is not a socket)."""
    if empty is None:
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY
        mount("tmpfs", path, "tmpfs", flags, "size=4k,mode=0555")
    else:
        mount(empty, path, None, MS_BIND, None)
        remount_read_only(path)


def listening_sockets() -> tuple[list[str], int]:
    """The paths of the Unix sockets ``/proc/net/unix`` lists as listening (stream
    and seqpacket) or bound (datagram), in this network namespace; and how many
    were bound by a relative name, which cannot be found. Read before a new
    network namespace is made (it would list none): a pathname socket is reached
    through the file system from any network namespace."""
    try:
        with open("/proc/net/unix", "rb") as fh:
            lines = fh.read().split(b"\n")[1:]
    except OSError:
        return [], 0
    found: dict[str, None] = {}
    relative = 0
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8:
            continue
        flags, kind, path = int(fields[3], 16), int(fields[4], 16), fields[7]
        if path.startswith(b"@") or not (kind == SOCK_DGRAM or flags & SO_ACCEPTCON):
            continue
        if not path.startswith(b"/"):
            relative += 1
            continue
        found[os.fsdecode(path)] = None
    return list(found), relative


def cover_sockets(
    paths: list[str], limit: int, hidden: list[str], empty: str, notes: list[str]
) -> int:
    """Bind ``empty`` over each path in ``paths`` that is a socket here (one inside a
    folder about to be hidden needs none), at most ``limit``; returns how many."""
    covered = skipped = 0
    tops = [h.rstrip("/") + "/" for h in hidden]
    for path in paths:
        if any(path.startswith(top) for top in tops):
            continue
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:
            continue
        if covered >= limit:
            skipped += 1
            continue
        try:
            hide(path, empty)
        except SandboxError:
            if os.path.lexists(path):
                raise
            continue  # (gone meanwhile: nothing to reach)
        covered += 1
    if skipped:
        notes.append(
            f"{skipped} listening Unix sockets past the first {limit} were not covered: "
            "the command can connect to them"
        )
    return covered


def private_mounts(
    spec: dict[str, list[str]], network: bool, sockets: tuple[list[str], int], notes: list[str]
) -> bool:
    """Make the namespaces and the mounts of ``spec``; True if a PID namespace was made."""
    pid_namespace = enter_namespace(network)
    skip = {*spec.get("ro", ()), *spec.get("hd", ()), *spec.get("hf", ())}
    for path in spec.get("pin", ()):
        pin(path)
    for path in spec.get("seal", ()):
        seal(path, skip, notes)
    for path in spec.get("ro", ()):
        read_only(path)
    empty = spec.get("empty", ["/dev/null"])[0]
    hidden = spec.get("hd", [])
    limit = int(spec.get("sockets", ["0"])[0])
    cover_sockets([*spec.get("hs", ()), *sockets[0]], len(spec.get("hs", ())) + limit, hidden,
                  empty, notes)  # fmt: skip
    if sockets[1]:
        notes.append(
            f"{sockets[1]} listening Unix sockets were bound by a relative name and could "
            "not be found to cover"
        )
    for path in hidden:
        hide(path, None)
    for path in spec.get("hf", ()):
        hide(path, empty)
    return pid_namespace


def start_init() -> tuple[int, int, str]:
    """Fork the PID namespace's PID 1 (see ``init``). Returns its pid, the descriptor
    whose closing ends it (and with it, by the kernel, whatever is left in the
    namespace), and '' or why a fresh /proc could not be mounted."""
    hold_r, hold_w = os.pipe()
    told_r, told_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            init(hold_r, told_w)
        finally:
            os._exit(0)
    os.close(hold_r)
    os.close(told_w)
    told = b""
    while chunk := os.read(told_r, 4096):
        told += chunk
    os.close(told_r)
    return pid, hold_w, told.decode("utf-8", "replace")


def init(hold: int, told: int) -> None:  # pragma: no cover (runs in the child)
    """PID 1 of the command's PID namespace: mount a /proc that shows only the
    namespace, say whether that worked, then reap orphans until ``hold`` ends.
    Outside the Landlock domain (forked before it is made), so the command can
    neither signal nor trace it; as a namespace's init it ignores signals it has no
    handler for, even SIGKILL, from inside."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, reap_orphans)
    low = 3
    for fd in sorted((hold, told)):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    except SandboxError as exc:
        os.write(told, str(exc).encode())
    os.close(told)
    while os.read(hold, 64):
        pass


def reap_orphans(signum: int, frame: object) -> None:  # pragma: no cover (in init)
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def parse(entries: list[str]) -> dict[str, list[str]]:
    spec: dict[str, list[str]] = {}
    for entry in entries:
        key, _, value = entry.partition(":")
        spec.setdefault(key, []).append(value)
    return spec


def apply(entries: list[str]) -> dict[str, Any]:
    """Apply the sandbox of ``entries`` to this process; returns what was applied
    (``mode``, ``landlock`` ABI, ``namespace``, ``pid_namespace``, ``network``,
    ``notes``; with the allow-list's bridge ``proxy_port``, ``bridge`` (its pid) and
    ``bridge_hold`` (the descriptor whose closing ends it); with a PID namespace also ``init``, its PID 1, and the descriptors
    ``proc_fd``, the /proc this process saw before, and ``hold_fd``, which ends
    PID 1 when closed, for the supervisor to keep). Raises SandboxError when a
    required part cannot be applied."""
    spec = parse(entries)
    mode = spec.get("mode", ["workspace-write"])[0]
    network = spec.get("net", ["0"])[0] == "1"
    report: dict[str, Any] = {"mode": mode, "network": network, "namespace": False, "notes": []}
    if mode == "danger-full-access":
        report["landlock"] = 0
        return report
    notes: list[str] = report["notes"]
    pid_namespace = False
    target = open_proxy(spec, network, notes)
    if spec.get("ns", ["0"])[0] == "1":
        sockets = listening_sockets() if "sockets" in spec else ([], 0)
        pid_namespace = private_mounts(spec, network, sockets, notes)
        report["namespace"] = True
        if pid_namespace:
            report.update(pid_namespace_init(notes))
        else:
            notes.append(
                "no PID namespace here: the command can see the user's other processes in /proc"
            )
    else:
        hidden = len(spec.get("hd", ())) + len(spec.get("hf", ())) + len(spec.get("ro", ()))
        if hidden:
            notes.append("no mount namespace: protected and deny-listed paths are not covered")
    report["pid_namespace"] = pid_namespace
    port = start_bridge(target, report) if target is not None else 0
    version = abi()
    dirs = spec.get("w", []) if mode == "workspace-write" else []
    notes += restrict(dirs, spec.get("f", []), network, version, pid_namespace, port)
    report["landlock"] = version
    return report


def bridge_module() -> Any:
    """``tools/bridge.py``, imported by path like this module (standard library only)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import bridge

    return bridge


def open_proxy(spec: dict[str, list[str]], network: bool, notes: list[str]) -> int | None:
    """The allow-list proxy's socket, opened before the walls hide it; None without
    one (or without the network namespace its bridge needs)."""
    if "proxy" not in spec or network:
        return None
    if spec.get("ns", ["0"])[0] != "1":
        notes.append("the network allow-list needs a network namespace: the network is off")
        return None
    try:
        target: int = bridge_module().open_target(spec["proxy"][0])
    except OSError as exc:
        notes.append(f"the network allow-list's proxy is gone ({exc.strerror}): the network is off")
        return None
    return target


def start_bridge(target: int, report: dict[str, Any]) -> int:
    """In the command's network namespace, the bridge to the proxy (``tools/bridge.py``);
    its port (0, with a note, when it cannot start: the network is then off)."""
    try:
        pid, port, hold = bridge_module().start(target)
    except OSError as exc:
        os.close(target)
        report["notes"].append(
            f"the network allow-list's bridge could not start ({exc}): the network is off"
        )
        return 0
    report.update(proxy_port=port, bridge=pid, bridge_hold=hold)
    return int(port)


def pid_namespace_init(notes: list[str]) -> dict[str, int]:
    """Start PID 1 of the new PID namespace, keeping the /proc seen before it mounts
    its own (the supervisor accounts for processes by their pids out here)."""
    proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    pid, hold_fd, problem = start_init()
    if problem:
        notes.append(
            "the user's other processes stay visible in the command's /proc (a fresh "
            f"/proc could not be mounted: {problem})"
        )
    return {"init": pid, "proc_fd": proc_fd, "hold_fd": hold_fd}


def probe_namespace() -> tuple[str, bool]:
    """('' if a private mount namespace can be made here (tried in a child), else why;
    whether a PID namespace can be made with it)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        code = 1
        try:  # noqa: SIM105 (contextlib costs the supervisor's start-up time)
            code = 0 if enter_namespace(network=False) else 2
        except (SandboxError, OSError):
            pass
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code in (0, 2):
        return "", code == 0
    return "unshare(CLONE_NEWNS) is not permitted here (user namespaces disabled?)", False


if __name__ == "__main__":  # ``python -I -S landlock.py``: print what this kernel offers
    reason, pids = probe_namespace() if sys.platform.startswith("linux") else ("not Linux", False)
    sys.stdout.write(f"{abi()}\n{reason}\n{int(pids)}\n")
