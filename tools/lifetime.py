"""bastion's side of a supervised command (the supervisor is ``tools/reaper.py``),
and ``reap(record)``, which makes sure a recorded command is gone.

``Supervised.spawn`` starts the supervisor synchronously (``subprocess.Popen``
returns with the pid in hand, before any ``await``), so there is no moment in
which a cancel can leave a started process unowned: the caller enters its
``try`` at once, and every way out of it closes the lifeline, which makes the
supervisor kill everything the command started. (``asyncio``'s own subprocess
start awaits after the fork; a cancel landing there killed only the direct
child, which is how ``sleep 60 &`` used to survive a cancel.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from tools import reaper
from tools.reaper import (
    LINUX,
    RECORD_VERSION,
    UNTRACKED,
    Proc,
    boot_id,
    descendants,
    kill_group,
    kill_tree,
    stat,
)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
FINISH_BOUND_S = reaper.TERM_GRACE_S + reaper.KILL_BOUND_S + 2.0
UNREPORTED = (
    "the supervisor ended without reporting; processes the command started outside "
    "its process group may remain"
)


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


def reap(record: dict[str, Any], bound_s: float = 5.0) -> ReapResult:
    """Make sure nothing the command of ``record`` (from run_command's ``on_start``)
    started is still running; safe to call from a fresh process after a crash, and
    more than once. Blocks up to about ``bound_s`` (call it from a thread in async
    code). A pid is only ever signalled if its start time shows it is the process
    that was recorded, or (for the command's group) started after it."""
    if record.get("version") != RECORD_VERSION:
        return ReapResult(note=f"unknown process record version {record.get('version')!r}")
    if int(record.get("pgid", 0)) <= 1:  # killpg(0) would be our own group
        return ReapResult(note="the process record names no process group")
    if not LINUX or not os.path.isdir("/proc/self"):
        killed, left = kill_group(int(record["pgid"]))
        return ReapResult(tuple(killed), tuple(left), UNTRACKED)
    if record.get("boot_id") and record["boot_id"] != boot_id():
        return ReapResult()  # the machine restarted: nothing of it can be running
    sup_pid, sup_start = int(record["supervisor_pid"]), int(record["supervisor_start"])
    pgid, start = int(record["pgid"]), int(record["start_time"])
    supervisor = stat(sup_pid)
    roots = [supervisor] if supervisor is not None and supervisor.start == sup_start else []
    leader = stat(pgid)
    recycled = leader is not None and leader.start != start
    # The command's PID namespace's PID 1 (tools/landlock.py) ends only once the
    # supervisor has collected the command: it goes with the supervisor, not before.
    init = stat(int(record.get("init") or 0)) if roots else None
    if init is not None and init.ppid == sup_pid:
        roots.append(init)

    ends = {r.pid for r in roots}

    def members(procs: dict[int, Proc]) -> list[Proc]:
        found = [p for r in roots for p in descendants(r.pid, procs) if p.pid not in ends]
        if not recycled:
            found += [p for p in procs.values() if p.pgid == pgid and p.start >= start]
        return found

    # Descendants first: the supervisor dies last, so nothing re-parents away from it.
    killed, left = kill_tree([], members, bound_s)
    if roots:
        more, rest = kill_tree(roots, lambda procs: [], bound_s)
        killed, left = killed + more, left + rest
    remove_tmpdir(record.get("tmpdir"))
    return ReapResult(tuple(killed), tuple(left))


def remove_tmpdir(path: object) -> None:
    """A crashed command's temp dir (``bastion-cmd-*`` in the system temp dir only)."""
    if not isinstance(path, str) or not os.path.basename(path).startswith("bastion-cmd-"):
        return
    temp = tempfile.gettempdir()
    if os.path.dirname(path) in (temp, os.path.realpath(temp)):
        reaper.remove_tree(path)


class SupervisorError(Exception):
    """The supervisor broke its protocol or vanished; the caller kills the group."""


class Supervised:
    """One command under its supervisor: output and report pipes, and the lifeline."""

    def __init__(self, proc: subprocess.Popen[bytes], life: int, report: int, output: int) -> None:
        self.proc = proc
        self.life = life  # write end; closing it means "kill everything now"
        self._fds = {"report": report, "output": output}
        self.reports = asyncio.StreamReader()
        self.output = asyncio.StreamReader(limit=1 << 16)
        self._transports: list[asyncio.BaseTransport] = []
        self.child = 0
        self.child_start = 0
        self.tracked = False
        self.sandbox: dict[str, Any] | None = None
        self.exit_code: int | None = None
        self.reaped: ReapResult | None = None
        self.supervisor_start = start_time(proc.pid)

    @classmethod
    def spawn(
        cls,
        argv: tuple[str, ...],
        env: dict[str, str],
        spawn: dict[str, Any],
        sandbox: tuple[str, ...] = (),
        *,
        stdin: int | None = None,
        stderr: int | None = None,
    ) -> Supervised:
        """Start the supervisor of ``argv``; ``sandbox`` is the spec it applies to itself
        before it starts the command (``tools.sandbox.plan``; empty: none). The command
        reads ``stdin`` (default /dev/null) and writes its stderr to ``stderr`` (default:
        merged with stdout into ``output``); the caller keeps and closes both."""
        life_r, life_w = os.pipe()
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        keep = (life_r, report_w, *spawn.pop("pass_fds", ()))
        try:
            proc = subprocess.Popen(
                [*supervisor_argv(life_r, report_w, sandbox), *argv],
                stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=out_w,
                stderr=out_w if stderr is None else stderr,
                env=env,
                start_new_session=True,
                pass_fds=keep,
                **spawn,
            )
        except BaseException:
            for fd in (life_w, report_r, out_r):
                os.close(fd)
            raise
        finally:
            for fd in (life_r, report_w, out_w):
                os.close(fd)
        return cls(proc, life_w, report_r, out_r)

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        for name, reader in (("report", self.reports), ("output", self.output)):
            fd = self._fds.pop(name)
            transport, _ = await loop.connect_read_pipe(
                lambda r=reader: asyncio.StreamReaderProtocol(r),  # type: ignore[misc]
                os.fdopen(fd, "rb", buffering=0),
            )
            self._transports.append(transport)

    async def message(self) -> dict[str, Any] | None:
        """The supervisor's next report, or None at its end (it has exited)."""
        line = await self.reports.readline()
        if not line:
            return None
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise SupervisorError(f"unreadable report {line[:80]!r}") from exc
        if not isinstance(message, dict):
            raise SupervisorError("report is not an object")
        if "exit" in message:
            self.exit_code = int(message["exit"])
        if "reaped" in message:
            self.reaped = ReapResult.from_dict(message["reaped"])
        return message

    async def started(self) -> dict[str, Any]:
        """The first report: ``started`` (the command runs) or ``spawn_error``."""
        message = await self.message()
        if message is None:
            raise SupervisorError("the supervisor ended before starting the command")
        if "started" in message:
            self.child = int(message["started"])
            self.child_start = int(message.get("start_time", 0))
            self.tracked = bool(message.get("tracked"))
            self.sandbox = message.get("sandbox")
        return message

    def record(self, output_id: str, tmpdir: str | None = None) -> dict[str, Any]:
        """What ``reaper.reap`` needs to find this command again after a crash (and the
        command's temp dir, to remove)."""
        return {
            "version": RECORD_VERSION,
            "supervisor_pid": self.proc.pid,
            "supervisor_start": self.supervisor_start,
            "pid": self.child,
            "pgid": self.child,
            "start_time": self.child_start,
            "boot_id": boot_id(),
            "tracked": self.tracked,
            "output_id": output_id,
            "tmpdir": tmpdir,
            "init": int((self.sandbox or {}).get("init") or 0),
        }

    async def exited(self, timeout_s: float) -> bool:
        """Wait for the command's exit report; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self.exit_code is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                message = await asyncio.wait_for(self.message(), left)
            except TimeoutError:
                return False
            if message is None:
                raise SupervisorError("the supervisor ended before the command did")
        return True

    def request(self, what: bytes) -> None:
        """``b"T"``: SIGTERM everything, then SIGKILL after a grace."""
        with contextlib.suppress(BrokenPipeError):
            os.write(self.life, what)

    def kill(self) -> None:
        """Close the lifeline: the supervisor kills everything now."""
        if self.life >= 0:
            os.close(self.life)
            self.life = -1

    async def finished(self) -> ReapResult:
        """Read reports to the supervisor's end and collect it; if it does not end in
        time, kill it and the command's group and say what may remain."""
        try:
            async with asyncio.timeout(FINISH_BOUND_S):
                while await self.message() is not None:
                    pass
        except (TimeoutError, SupervisorError):
            self.force()
        await self.wait_supervisor()
        if self.reaped is None:
            return ReapResult(note=UNREPORTED)
        return self.reaped

    def force(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.child:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.child, signal.SIGKILL)

    async def wait_supervisor(self) -> None:
        delay = 0.001
        deadline = time.monotonic() + 5.0
        while self.proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def close(self) -> None:
        self.kill()
        for transport in self._transports:
            transport.close()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def supervisor_argv(life: int, report: int, sandbox: tuple[str, ...]) -> list[str]:
    """The supervisor's command line up to the command: its pipes, then the count of
    sandbox entries and the entries."""
    return [sys.executable, "-I", "-S", SCRIPT, str(life), str(report), str(len(sandbox)), *sandbox]


def start_time(pid: int) -> int:
    proc = stat(pid)
    return proc.start if proc is not None else 0
