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

Without a subreaper (macOS, other Unixes) the supervisor kills the command's
process group; processes that left it (``setsid``) cannot be found there, and
the result says so.

``reap(record)`` is the second line of defence, for a fresh process after a
crash: given the record run_command handed to ``on_start``, it kills what is left
of the supervisor's tree and of the command's group, and says what it killed and
what may remain.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

RECORD_VERSION = 1
KILL_BOUND_S = 3.0  # how long the supervisor keeps killing before it reports leftovers
TERM_GRACE_S = 1.0  # SIGTERM -> SIGKILL on timeout
PR_SET_CHILD_SUBREAPER = 36
LINUX = sys.platform.startswith("linux")


@dataclass(frozen=True, slots=True)
class Proc:
    """One line of ``/proc/PID/stat``: what is needed to find a process again."""

    pid: int
    name: str
    state: str
    ppid: int
    pgid: int
    start: int  # field 22: start time in clock ticks since boot

    @property
    def dead(self) -> bool:
        return self.state in ("Z", "X", "x")


def stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:  # gone, or not Linux
        return None
    close = raw.rindex(b")")
    name = raw[raw.index(b"(") + 1 : close].decode("utf-8", "replace")
    rest = raw[close + 2 :].split()
    return Proc(pid, name, rest[0].decode(), int(rest[1]), int(rest[2]), int(rest[19]))


def table() -> dict[int, Proc]:
    procs: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
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
        os.kill(proc.pid, sig)
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
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


@dataclass(frozen=True, slots=True)
class ReapResult:
    """What ``reap`` (or the supervisor) killed, and what may remain: each a tuple
    of ``(pid, name)``. ``note`` says why something could not be checked."""

    killed: tuple[tuple[int, str], ...] = ()
    remaining: tuple[tuple[int, str], ...] = ()
    note: str = ""

    @property
    def clean(self) -> bool:
        return not self.remaining and not self.note

    def to_dict(self) -> dict[str, Any]:
        return {
            "killed": [list(p) for p in self.killed],
            "remaining": [list(p) for p in self.remaining],
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReapResult:
        def pairs(key: str) -> tuple[tuple[int, str], ...]:
            return tuple((int(p), str(n)) for p, n in data.get(key, ()))

        return cls(pairs("killed"), pairs("remaining"), str(data.get("note", "")))


def kill_tree(
    roots: list[Proc], members: Any, bound_s: float = KILL_BOUND_S, reaper: bool = False
) -> ReapResult:
    """SIGKILL ``roots`` and everything ``members(procs)`` lists, again and again,
    until none is alive or ``bound_s`` passes. A killed parent's children re-parent
    (to us when we are the subreaper), so the next listing still finds them."""
    killed: dict[int, str] = {}
    denied: set[tuple[int, int]] = set()
    deadline = time.monotonic() + bound_s
    delay = 0.001
    while True:
        procs = table()
        live = [p for p in (*roots, *members(procs)) if p.pid in procs and not procs[p.pid].dead]
        live = [procs[p.pid] for p in live if procs[p.pid].start == p.start]
        if not live or all((p.pid, p.start) in denied for p in live):
            break
        if time.monotonic() > deadline:
            break
        for proc in live:
            try:
                if signal_exact(proc, signal.SIGKILL):
                    killed.setdefault(proc.pid, proc.name)
            except PermissionError:
                denied.add((proc.pid, proc.start))
        if reaper:
            reap_children()
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    left = tuple((p.pid, p.name) for p in live)
    return ReapResult(tuple(killed.items()), left)


def reap(record: dict[str, Any], bound_s: float = 5.0) -> ReapResult:
    """Make sure nothing the command of ``record`` (from run_command's ``on_start``)
    started is still running; safe to call from a fresh process after a crash, and
    more than once. Blocks up to about ``bound_s`` (call it from a thread in async
    code). A pid is only ever signalled if its start time shows it is the process
    that was recorded, or (for the command's group) started after it."""
    if record.get("version") != RECORD_VERSION:
        return ReapResult(note=f"unknown process record version {record.get('version')!r}")
    if not LINUX or not os.path.isdir("/proc/self"):
        return reap_group_only(record)
    if record.get("boot_id") and record["boot_id"] != boot_id():
        return ReapResult()  # the machine restarted: nothing of it can be running
    sup_pid, sup_start = int(record["supervisor_pid"]), int(record["supervisor_start"])
    pgid, start = int(record["pgid"]), int(record["start_time"])
    supervisor = stat(sup_pid)
    roots = [supervisor] if supervisor is not None and supervisor.start == sup_start else []
    leader = stat(pgid)
    recycled = leader is not None and leader.start != start

    def members(procs: dict[int, Proc]) -> list[Proc]:
        found = [p for r in roots for p in descendants(r.pid, procs)]
        if not recycled:
            found += [p for p in procs.values() if p.pgid == pgid and p.start >= start]
        return found

    # Descendants first: the supervisor dies last, so nothing re-parents away from it.
    result = kill_tree([], members, bound_s)
    if roots:
        last = kill_tree(roots, lambda procs: [], bound_s)
        result = ReapResult(result.killed + last.killed, result.remaining + last.remaining)
    return result


def reap_group_only(record: dict[str, Any]) -> ReapResult:
    """Where there is no /proc: the command's process group is all that can be found."""
    pgid = int(record["pgid"])
    try:
        os.killpg(pgid, signal.SIGKILL)
        killed: tuple[tuple[int, str], ...] = ((pgid, "process group"),)
    except ProcessLookupError:
        killed = ()
    except PermissionError:
        return ReapResult(remaining=((pgid, "process group"),))
    return ReapResult(killed, note=UNTRACKED)


UNTRACKED = (
    "on this platform only the command's process group is tracked; processes that "
    "left it (setsid, daemons) may remain"
)


# -- the supervisor (run as a script) -------------------------------------------------


def subreaper() -> bool:
    if not LINUX:
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


class Supervisor:
    def __init__(self, life: int, report: int, argv: list[str]) -> None:
        self.life, self.report, self.argv = life, report, argv
        self.child = 0
        self.child_start = 0
        self.status: int | None = None
        self.tracked = False

    def send(self, **message: Any) -> None:
        with contextlib.suppress(OSError):  # bastion is gone: keep cleaning up
            os.write(self.report, json.dumps(message).encode() + b"\n")

    def start(self) -> bool:
        self.tracked = subreaper()
        quiet = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP)
        try:
            self.child = os.posix_spawnp(
                self.argv[0], self.argv, os.environ, setpgroup=0, setsigdef=quiet, setsigmask=()
            )
        except OSError as exc:
            self.send(spawn_error=exc.errno, message=exc.strerror or type(exc).__name__)
            return False
        proc = stat(self.child)
        self.child_start = proc.start if proc is not None else 0
        self.send(started=self.child, start_time=self.child_start, tracked=self.tracked)
        # The command holds the output pipe; we must not, or it never ends.
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        return True

    def collect(self) -> None:
        with contextlib.suppress(ChildProcessError):
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    return
                if pid == self.child:
                    self.status = os.waitstatus_to_exitcode(status)
                    self.send(exit=self.status)

    def watch(self, wake: int) -> None:
        """Until the command exits, the lifeline ends, or a timeout's grace runs out."""
        term_at: float | None = None
        while True:
            wait = None if term_at is None else max(0.0, term_at - time.monotonic())
            ready, _, _ = select.select([self.life, wake], [], [], wait)
            if wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 4096)
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
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child, sig)
        if self.tracked:
            for proc in descendants(os.getpid(), table()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal_exact(proc, sig)

    def finish(self) -> None:
        def members(procs: dict[int, Proc]) -> list[Proc]:
            return descendants(os.getpid(), procs) if self.tracked else []

        if self.tracked:
            result = kill_tree([], members, reaper=True)
        else:
            result = reap_group_only({"pgid": self.child})
        reap_children()
        note = "" if self.tracked else UNTRACKED
        self.send(reaped=ReapResult(result.killed, result.remaining, note).to_dict())


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
    supervisor = Supervisor(life, report, argv[3:])
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


class Stop(Exception):
    """The supervisor itself was asked to end (SIGTERM, SIGHUP, SIGINT)."""


def stop(signum: int, frame: object) -> None:
    raise Stop(signum)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
