"""Process lifetime for run_command: the per-command supervisor, and ``reap``.

Every command runs under a small supervisor process (this file, run as a script
with ``python -I -S``, so it imports only the standard library and never the
``tools`` package). The supervisor

- is started by bastion in a session of its own and, on Linux, makes itself a
  *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): whatever the command
  starts, even after ``setsid`` or a double fork, stays its descendant, because an
  orphan re-parents to the nearest subreaper instead of init;
- spawns the command in a process group of its own and reports to bastion, one
  JSON line each, that it started, how it exited, and what it killed;
- kills every descendant (``SIGKILL``, repeated until none is left, each kill
  aimed through a pidfd checked against the start time, so a recycled pid is
  never hit) when the command exits, when bastion asks (``T``: SIGTERM, a grace,
  then SIGKILL), and when its lifeline pipe from bastion reads end-of-file: a
  cancel closes it, and so does the kernel when bastion dies in any way (SIGKILL,
  SIGHUP, a crash). A pipe is used rather than ``PR_SET_PDEATHSIG``, which fires
  on the death of the *thread* that forked, not of the process.

Given a sandbox spec (``tools.sandbox.plan``: a count, then the entries, before
the command's argv), the supervisor applies it to itself before it starts the
command (``tools/landlock.py``, imported by path), so the command and all it
starts inherit it; if it cannot be applied it reports ``sandbox_error`` and
starts nothing. Descriptors it holds are made close-on-exec first, so none
opened before the sandbox reaches the command.

Where the kernel allows, the command runs in a PID namespace of its own: the
sandbox forks the namespace's PID 1 (``landlock.init``: it mounts a /proc showing
only the namespace and reaps orphans), and the command, started by the supervisor
as before, is its second process. The supervisor stays outside: it still starts,
waits for and kills the command by the pids it sees, listing processes through
the /proc it saw before (``PROC_FD``); the command's orphans become PID 1's
children, still our descendants. PID 1 is never counted as killed: closing its
lifeline ends it, and with it, by the kernel, whatever is left in the namespace;
the supervisor's own death closes it too.

Without a subreaper (macOS, other Unixes) the supervisor kills the command's
process group; processes that left it (``setsid``) cannot be found there, and
the result says so.

``tools.lifetime.reap(record)`` is the second line of defence, for a fresh
process after a crash; it uses the functions here.

This file starts a process per command, so it imports little: no json (which
imports re: 20 ms at every start), dataclasses, contextlib or typing.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # typing is not imported: the supervisor starts faster without it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

RECORD_VERSION = 1
KILL_BOUND_S = 3.0  # how long the supervisor keeps killing before it reports leftovers
TERM_GRACE_S = 1.0  # SIGTERM -> SIGKILL on timeout
PR_SET_CHILD_SUBREAPER = 36
LINUX = sys.platform.startswith("linux")
UNTRACKED = (
    "on this platform only the command's process group is tracked; processes that "
    "left it (setsid, daemons) may remain"
)


class Proc:
    """One line of ``/proc/PID/stat``: what is needed to find a process again.
    ``start`` is field 22, the start time in clock ticks since boot."""

    __slots__ = ("name", "pgid", "pid", "ppid", "start", "state")

    def __init__(self, pid: int, name: str, state: str, ppid: int, pgid: int, start: int):
        self.pid, self.name, self.state = pid, name, state
        self.ppid, self.pgid, self.start = ppid, pgid, start

    @property
    def dead(self) -> bool:
        return self.state in ("Z", "X", "x")


# The /proc this process lists and reads processes through: with the command in a
# PID namespace of its own, its PID 1 mounts a fresh /proc over /proc (which then
# shows the namespace's pids only), so the supervisor keeps a descriptor of the one
# it saw before (``tools/landlock.py`` ``pid_namespace_init``). None: "/proc".
PROC_FD: int | None = None


def stat(pid: int) -> Proc | None:
    try:
        if PROC_FD is None:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                raw = fh.read()
        else:
            fd = os.open(f"{pid}/stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=PROC_FD)
            try:
                raw = os.read(fd, 4096)
            finally:
                os.close(fd)
    except OSError:  # gone, or not Linux
        return None
    close = raw.rindex(b")")
    name = raw[raw.index(b"(") + 1 : close].decode("utf-8", "replace")
    rest = raw[close + 2 :].split()
    return Proc(pid, name, rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[19]))


def table() -> dict[int, Proc]:
    procs: dict[int, Proc] = {}
    for entry in os.listdir("/proc" if PROC_FD is None else PROC_FD):
        if entry.isdigit() and (proc := stat(int(entry))) is not None:
            procs[proc.pid] = proc
    return procs


def descendants(root: int, procs: dict[int, Proc]) -> list[Proc]:
    children: dict[int, list[Proc]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    found: list[Proc] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child.pid)
    return found


def boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return None


def signal_exact(proc: Proc, sig: int) -> bool:
    """Signal ``proc`` only if that pid still is the process that was listed (same
    start time), through a pidfd where the kernel has them. True if it was sent;
    PermissionError propagates."""
    if not LINUX or not hasattr(os, "pidfd_open"):
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            return False
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return False
    try:
        now = stat(proc.pid)
        if now is None or now.start != proc.start:
            return False  # the pid was recycled between the listing and the pidfd
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def reap_children() -> None:
    """Collect exited children (the command's orphans re-parent to us)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


Pairs = list[tuple[int, str]]


def kill_tree(
    roots: Iterable[Proc],
    members: Callable[[dict[int, Proc]], Iterable[Proc]],
    bound_s: float = KILL_BOUND_S,
    reaper: bool = False,
) -> tuple[Pairs, Pairs]:
    """SIGKILL ``roots`` and everything ``members(procs)`` lists, again and again,
    until none is alive or ``bound_s`` passes; returns (killed, remaining) as
    (pid, name) pairs. A killed parent's children re-parent (to us when we are the
    subreaper), so the next listing still finds them."""
    killed: dict[int, str] = {}
    denied: set[tuple[int, int]] = set()
    deadline = time.monotonic() + bound_s
    delay = 0.001
    while True:
        procs = table()
        listed = [*roots, *members(procs)]
        live = [procs[p.pid] for p in listed if p.pid in procs and procs[p.pid].start == p.start]
        live = [p for p in live if not p.dead]
        if not live or all((p.pid, p.start) in denied for p in live):
            break
        if time.monotonic() > deadline:
            break
        for proc in reversed(live):  # the deepest first: a PID namespace's PID 1 last
            try:
                if signal_exact(proc, signal.SIGKILL):
                    killed.setdefault(proc.pid, proc.name)
            except PermissionError:
                denied.add((proc.pid, proc.start))
        if reaper:
            reap_children()
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return list(killed.items()), [(p.pid, p.name) for p in live]


def kill_group(pgid: int) -> tuple[Pairs, Pairs]:
    """Where descendants cannot be listed: SIGKILL the command's process group."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return [], []
    except PermissionError:
        return [], [(pgid, "process group")]
    return [(pgid, "process group")], []


# -- the supervisor (run as a script) -------------------------------------------------


def to_json(value: object) -> str:
    """JSON for the supervisor's reports (ints, bools, strs, lists, dicts)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return (
            '"' + "".join(c if c.isalnum() or c in " ._-()/:,=" else escape(c) for c in value) + '"'
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{to_json(str(k))}:{to_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot report a {type(value).__name__}")


def escape(c: str) -> str:
    code = ord(c)
    if code > 0xFFFF:  # a surrogate pair, as JSON spells it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def subreaper(become: bool = True) -> bool:
    """Become a child subreaper (Linux 3.4+); with ``become=False`` only ask whether
    this kernel has them (``PR_GET_CHILD_SUBREAPER``, changing nothing). False where
    it is impossible (no prctl, a Python without ctypes): the process group is then
    all that is tracked."""
    if not LINUX:
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return False
    if not become:
        flag = ctypes.c_int()
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER + 1, ctypes.byref(flag), 0, 0, 0) == 0)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def sandbox(entries: list[str]) -> dict[str, Any]:
    """Apply the command sandbox (``tools/landlock.py``, imported by path) to this
    process, so that the command and all it starts inherit it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock

    applied: dict[str, Any] = landlock.apply(entries)
    return applied


def close_inherited(keep: tuple[int, ...]) -> None:
    """Make every descriptor but stdio and ``keep`` close on exec: the command must
    not get one opened before the sandbox (the cwd's, say, which would reach the
    workspace around a read-only mount)."""
    for name in os.listdir("/proc/self/fd") if LINUX else ():
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:  # noqa: SIM105
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the listing's own descriptor, closed meanwhile


class Supervisor:
    def __init__(self, life: int, report: int, argv: list[str], policy: list[str]) -> None:
        self.life, self.report, self.argv = life, report, argv
        self.policy = policy
        # The command's own temp dir (the sandbox's TMPDIR): emptied when it ends, even
        # when bastion is gone. The folder itself stays (Landlock lets us write in it,
        # not in its parent); bastion removes it, or `reap` after a crash.
        self.tmp = next((e[4:] for e in policy if e.startswith("tmp:")), None)
        self.child = 0
        self.status: int | None = None
        self.tracked = False
        # The command's PID namespace's PID 1 (``tools/landlock.py`` ``init``), not the
        # command's: never counted as killed, and ended by closing ``hold``.
        self.init = 0
        self.hold = -1
        # The network allow-list's bridge (``tools/bridge.py``): not the command's either,
        # ended after it by closing ``bridge_hold``.
        self.bridge = 0
        self.bridge_hold = -1

    def send(self, **message: Any) -> None:
        try:  # noqa: SIM105 (contextlib costs the supervisor's start-up time)
            os.write(self.report, to_json(message).encode() + b"\n")
        except OSError:
            pass  # bastion is gone: keep cleaning up

    def start(self) -> bool:
        self.tracked = subreaper()
        null = os.open(os.devnull, os.O_RDWR)  # before the sandbox, which may hide it
        applied: dict[str, Any] | None = None
        if self.policy:
            close_inherited(())
            try:
                applied = sandbox(self.policy)
                self.keep_init(applied)
                os.chdir(os.getcwd())  # through the new mounts, not around them
            except Exception as exc:  # reported; the command does not run
                self.send(sandbox_error=f"{type(exc).__name__}: {exc}")
                return False
        quiet = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP)
        try:
            self.child = os.posix_spawnp(
                self.argv[0], self.argv, os.environ, setpgroup=0, setsigdef=quiet, setsigmask=()
            )
        except OSError as exc:
            self.send(spawn_error=exc.errno, message=exc.strerror or type(exc).__name__)
            return False
        proc = stat(self.child)
        start = proc.start if proc is not None else 0
        self.send(started=self.child, start_time=start, tracked=self.tracked, sandbox=applied)
        # The command holds the output pipe; we must not, or it never ends.
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        return True

    def keep_init(self, applied: dict[str, Any]) -> None:
        """Take the PID namespace's parts out of the report (descriptors are not news),
        and the bridge's; the command's proxy variables name the bridge's port."""
        global PROC_FD
        if "init" in applied:
            self.init, self.hold = applied["init"], applied.pop("hold_fd")
            PROC_FD = applied.pop("proc_fd")
        if "bridge" in applied:
            self.bridge, self.bridge_hold = applied.pop("bridge"), applied.pop("bridge_hold")
            proxy = f"http://127.0.0.1:{applied['proxy_port']}"
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
                os.environ[name] = os.environ[name.lower()] = proxy
            for name in ("NO_PROXY", "no_proxy"):
                os.environ.pop(name, None)

    def command_tree(self, procs: dict[int, Proc]) -> list[Proc]:
        """Every process the command started (and the command): our descendants but
        the PID namespace's PID 1, whose children the command's orphans become."""
        return [p for p in descendants(os.getpid(), procs) if p.pid not in (self.init, self.bridge)]

    def end_bridge(self) -> None:
        """Close the bridge's lifeline and collect it (SIGKILL if it lingers)."""
        if self.bridge_hold < 0:
            return
        os.close(self.bridge_hold)
        self.bridge_hold = -1
        deadline, killed = time.monotonic() + 1.0, False
        delay = 0.001
        while True:
            try:
                if os.waitpid(self.bridge, os.WNOHANG)[0] == self.bridge:
                    return
            except ChildProcessError:
                return
            if time.monotonic() > deadline:
                if killed:
                    return  # (the PID namespace's end takes it, where there is one)
                try:  # noqa: SIM105
                    os.kill(self.bridge, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                deadline, killed = time.monotonic() + KILL_BOUND_S, True
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def end_init(self) -> None:
        """Close PID 1's lifeline (it exits, and the kernel ends anything left in the
        namespace) and collect it, waiting a bounded while. The kernel lets PID 1 go
        only once every process of its namespace is reaped, and the command's own
        processes are our children: they are collected meanwhile (else each cut
        command waited out the bound, 3 s, with its killed processes unreaped)."""
        if self.hold < 0:
            return
        os.close(self.hold)
        self.hold = -1
        deadline = time.monotonic() + KILL_BOUND_S
        delay = 0.001
        while time.monotonic() < deadline:
            try:
                if os.waitpid(self.init, os.WNOHANG)[0] == self.init:
                    return
            except ChildProcessError:
                return
            reap_children()  # (PID 1 itself too, once it exits: the next waitpid says so)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def collect(self) -> None:
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    return
                if pid == self.child:
                    self.status = os.waitstatus_to_exitcode(status)
                    self.send(exit=self.status)
        except ChildProcessError:
            return

    def watch(self, wake: int) -> None:
        """Until the command exits, the lifeline ends, or a timeout's grace runs out."""
        term_at: float | None = None
        while True:
            wait = None if term_at is None else max(0.0, term_at - time.monotonic())
            ready, _, _ = select.select([self.life, wake], [], [], wait)
            if wake in ready:
                try:  # noqa: SIM105
                    os.read(wake, 4096)
                except BlockingIOError:
                    pass
            self.collect()
            if self.status is not None:
                return
            if self.life in ready:
                data = os.read(self.life, 64)
                if not data:
                    return  # cancelled, or bastion died
                if b"T" in data and term_at is None:
                    self.signal_all(signal.SIGTERM)
                    term_at = time.monotonic() + TERM_GRACE_S
            if term_at is not None and time.monotonic() >= term_at:
                return

    def signal_all(self, sig: int) -> None:
        targets = self.command_tree(table()) if self.tracked else []
        try:  # noqa: SIM105
            os.killpg(self.child, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in targets:
            try:  # noqa: SIM105
                signal_exact(proc, sig)
            except PermissionError:
                pass

    def finish(self) -> None:
        if self.tracked:
            killed, left = kill_tree([], self.command_tree, reaper=True)
        else:
            killed, left = kill_group(self.child)
        self.end_bridge()
        self.end_init()
        reap_children()
        note = "" if self.tracked else UNTRACKED
        self.send(reaped={"killed": killed, "remaining": left, "note": note})
        if self.tmp:
            remove_tree(self.tmp)


def remove_tree(top: str) -> None:
    """Remove everything in ``top`` and then ``top``, links never followed; what cannot
    be removed stays (bastion's own clean-up reports it)."""
    todo, folders = [top], []
    while todo:
        path = todo.pop()
        folders.append(path)
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass
    for path in reversed(folders):
        try:  # noqa: SIM105
            os.rmdir(path)
        except OSError:
            pass


class Stop(Exception):
    """The supervisor itself was asked to end (SIGTERM, SIGHUP, SIGINT)."""


def stop(signum: int, frame: object) -> None:
    raise Stop(signum)


def main(argv: list[str]) -> int:
    life, report = int(argv[1]), int(argv[2])
    for fd in (life, report):
        os.set_inheritable(fd, False)  # the command must not hold either pipe
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)  # killed politely: take the command down with us
    count = int(argv[3])  # then `count` sandbox entries, then the command
    supervisor = Supervisor(life, report, argv[4 + count :], argv[4 : 4 + count])
    if not supervisor.start():
        return 0
    try:
        supervisor.watch(wake_r)
    except Stop:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        supervisor.finish()
    return 0


if __name__ == "__main__":
    # Nothing is buffered (reports are written with os.write): skip the interpreter's
    # teardown, which bastion would otherwise wait for at the end of every command.
    os._exit(main(sys.argv))
