"""bastion's side of a supervised command (the supervisor is ``tools/reaper.py``).

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
import time
from typing import Any

from tools import reaper

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
FINISH_BOUND_S = reaper.TERM_GRACE_S + reaper.KILL_BOUND_S + 2.0


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
        self.exit_code: int | None = None
        self.reaped: reaper.ReapResult | None = None
        self.supervisor_start = start_time(proc.pid)

    @classmethod
    def spawn(cls, argv: tuple[str, ...], env: dict[str, str], spawn: dict[str, Any]) -> Supervised:
        life_r, life_w = os.pipe()
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        keep = (life_r, report_w, *spawn.pop("pass_fds", ()))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", SCRIPT, str(life_r), str(report_w), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=out_w,
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
            self.reaped = reaper.ReapResult.from_dict(message["reaped"])
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
        return message

    def record(self, output_id: str) -> dict[str, Any]:
        """What ``reaper.reap`` needs to find this command again after a crash."""
        return {
            "version": reaper.RECORD_VERSION,
            "supervisor_pid": self.proc.pid,
            "supervisor_start": self.supervisor_start,
            "pid": self.child,
            "pgid": self.child,
            "start_time": self.child_start,
            "boot_id": reaper.boot_id(),
            "tracked": self.tracked,
            "output_id": output_id,
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

    async def finished(self) -> reaper.ReapResult:
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
            return reaper.ReapResult(
                note="the supervisor ended without reporting; processes the command "
                "started outside its process group may remain"
            )
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


def start_time(pid: int) -> int:
    proc = reaper.stat(pid)
    return proc.start if proc is not None else 0
