"""Background jobs: a run_command with ``background: true`` that keeps running.

A job starts exactly as a foreground command does (``tools.command.launch`` and
``begin``: the same supervisor, sandbox and ``on_start`` record, which then also
names the job), returns once its first output is in (FIRST_WAIT_S at most) and
runs on. Its output goes to its artifact as it arrives, capped as a command's is
(``MAX_ARTIFACT_BYTES``); its first and last bytes are kept in memory besides
(``Sink``), so memory stays bounded whatever it prints. read_output reads it by
the job's id (what the model has not read yet, waiting for more up to a bound);
stop_job ends it.

``JobTable`` holds one session's jobs (``job_1``, ``job_2``, … in the order they
started) and at most MAX_RUNNING running at once. Its host (runtime.run.jobs)
seeds it with the session's earlier jobs, hears of each end (``on_end``) and stops
the rest when the session's driver ends. Nothing here outlives bastion: a job's
supervisor kills its whole process tree (``setsid`` and double forks included:
tools/reaper.py) when the job's command exits, when it is stopped, and when its
lifeline closes, which ``kill_all`` does at once and the kernel does when bastion
dies.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from tools import output
from tools.output import MAX_WAIT_S, unknown_job
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult

if TYPE_CHECKING:
    from tools.command import CommandArgs, Sink
    from tools.context import ToolContext
    from tools.lifetime import ReapResult, Supervised
    from tools.sandbox import SandboxPolicy
    from tools.sandbox_run import Prepared
    from tools.workspace import RelPath

__all__ = ["Job", "JobTable", "parse_id"]

RUNNING, EXITED, STOPPED, LOST = "running", "exited", "stopped", "lost"
MAX_RUNNING = 10  # running jobs of one session at once
FIRST_WAIT_S = 2.0  # run_command waits this long at most for a job's first output
FIRST_QUIET_S = 0.3  # ... and returns once its output pauses this long
FIRST_BYTES = 4096  # ... or once this much is in
STOP_BOUND_S = 10.0  # a stop waits this long for the supervisor, then closes its lifeline
LAST_CHARS = 2000  # characters of a job's last output kept with its end
_ID = re.compile(r"(?:job_)?([1-9][0-9]{0,5})\Z")

OnEnd = Callable[["Job"], Awaitable[None]]


def parse_id(text: str) -> int | None:
    """The number of ``job_N`` (or of a bare ``N``, as a user types it), else None."""
    found = _ID.match(text.strip())
    return int(found.group(1)) if found else None


class Job:
    """One background job. Live (supervisor, output, life task) until it ends; a job of
    an earlier process of the session is only what its record says (``known``)."""

    def __init__(self, number: int, command: str, cwd: str, output_id: str) -> None:
        self.number = number
        self.command = command
        self.cwd = cwd
        self.output_id = output_id
        self.started_at = time.time()
        self.state = RUNNING
        self.exit_code: int | None = None
        self.ended_at: float | None = None
        self.end_reason = ""  # why it was stopped ("" if it ended by itself)
        self.notes: list[str] = []  # what its end says besides (processes killed, sandbox)
        self.recorded_output = ""  # a known job's last output, as recorded
        self.seen = 0  # bytes of the artifact the model has read
        self.seen_total = 0  # bytes it had printed when the model last read
        self.sup: Supervised | None = None
        self.sink: Sink | None = None
        self.prep: Prepared | None = None
        self.policy: SandboxPolicy | None = None
        self.root = ""
        self.task: asyncio.Task[None] | None = None
        self.live: Callable[[str], None] | None = None  # the starting call's on_output
        self._changed = asyncio.Event()

    @classmethod
    def known(cls, record: dict[str, Any]) -> Job:
        """A job of an earlier process of this session (it has ended), from its record."""
        job = cls(
            int(record["number"]), str(record.get("command", "")), str(record.get("cwd", ".")),
            str(record.get("output_id", "")),
        )  # fmt: skip
        job.state = str(record.get("state") or LOST)
        if job.state == RUNNING:  # (the host settles such a record first; be sure)
            job.state = LOST
        code = record.get("exit_code")
        job.exit_code = code if isinstance(code, int) else None
        job.started_at = float(record.get("started_at") or 0.0)
        job.ended_at = float(record.get("ended_at") or 0.0) or None
        job.end_reason = str(record.get("end_reason") or "")
        job.recorded_output = str(record.get("last_output") or "")
        return job

    @property
    def id(self) -> str:
        return f"job_{self.number}"

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def output_bytes(self) -> int:
        return self.sink.total if self.sink is not None else 0

    def last_output(self, chars: int = LAST_CHARS) -> str:
        """The end of what it printed (about ``chars`` characters)."""
        sink = self.sink
        if sink is None:
            return self.recorded_output[-chars:]
        whole = sink.total == len(sink.head) + len(sink.tail)
        data = bytes(sink.head) + bytes(sink.tail) if whole else bytes(sink.tail)
        return data[-4 * chars :].decode("utf-8", "replace")[-chars:]

    def last_line(self, limit: int = 120) -> str:
        line = next(
            (s.strip() for s in reversed(self.last_output(4000).splitlines()) if s.strip()), ""
        )
        return line if len(line) <= limit else line[: limit - 1] + "…"

    def status(self) -> dict[str, Any]:
        """What is known of it, JSON-able (what its record and /jobs show)."""
        return {
            "id": self.id, "number": self.number, "command": self.command, "cwd": self.cwd,
            "state": self.state, "exit_code": self.exit_code, "started_at": self.started_at,
            "ended_at": self.ended_at, "end_reason": self.end_reason,
            "output_id": self.output_id, "output_bytes": self.output_bytes,
            "last_line": self.last_line(), "last_output": self.last_output(),
            "notes": list(self.notes),
        }  # fmt: skip

    def words(self) -> str:
        """`running`, `exited with code 3`, `stopped (by the user) with signal 15`, …"""
        if self.state == RUNNING:
            return "running"
        code = self.exit_code
        how = "" if code is None else f" with signal {-code}" if code < 0 else f" with code {code}"
        if self.state == LOST:
            return "ended when bastion stopped"
        if self.state == STOPPED:
            return f"stopped ({self.end_reason}){how}" if self.end_reason else f"stopped{how}"
        return f"exited{how}"

    # --- waiting --------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_more(self, total: int, timeout: float) -> None:
        """Until it has printed more than ``total`` bytes or ended; ``timeout`` at most."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.running and self.output_bytes <= total:
            left = deadline - loop.time()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    async def gather(self, total: int, timeout: float, enough: int) -> None:
        """Until it has printed more than ``total`` bytes, then on while more comes (a
        pause of FIRST_QUIET_S ends it), until ``enough`` more bytes, its end, or
        ``timeout``, whichever comes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.wait_for_more(total, timeout)
        while self.running and self.output_bytes - total < enough:
            before, left = self.output_bytes, deadline - loop.time()
            if left <= 0:
                return
            await self.wait_for_more(before, min(left, FIRST_QUIET_S))
            if self.output_bytes == before:
                return

    # --- its life -------------------------------------------------------------------

    async def run(self, on_end: OnEnd | None) -> None:
        """Its life: output read to the end, the exit waited for, the process tree gone
        (the supervisor sees to it), then ``on_end``."""
        assert self.sup is not None
        reader = asyncio.ensure_future(self._pump())
        try:
            await self._exit()
            reaped = await self.sup.finished()
            try:
                await asyncio.wait_for(asyncio.shield(reader), 1.0)
            except TimeoutError:
                reader.cancel()
        finally:
            if not reader.done():
                reader.cancel()
            self._release()
        self._ended(reaped)
        if on_end is not None:
            try:
                await on_end(self)
            except Exception as exc:  # the host's record of it failed: said with the job
                self.notes.append(f"its end could not be recorded ({type(exc).__name__})")

    async def _exit(self) -> None:
        from tools.lifetime import SupervisorError

        assert self.sup is not None
        while self.sup.exit_code is None:
            try:
                if await self.sup.message() is None:
                    return
            except SupervisorError:
                self.sup.force()
                return

    async def _pump(self) -> None:
        """Every byte to the sink (head and tail kept, the artifact written up to its cap);
        the starting call's live view gets it while that call waits."""
        from tools.command import deliver

        assert self.sup is not None and self.sink is not None
        sink, stream = self.sink, self.sup.output
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while chunk := await stream.read(1 << 16):
            sink.take(chunk)
            if self.live is not None and (text := decoder.decode(chunk)):
                self.live = deliver(self.live, text, sink)
            self._notify()

    def _release(self) -> None:
        """Its descriptors and temp dir, once its processes are gone."""
        if self.sup is not None:
            self.sup.close()
        if self.sink is not None and self.sink.fd >= 0:
            os.close(self.sink.fd)
            self.sink.fd = -1
        if self.prep is not None:
            self.prep.cleanup()

    def _ended(self, reaped: ReapResult) -> None:
        from tools.sandbox_run import describe, findings

        assert self.sup is not None and self.sink is not None
        self.exit_code = self.sup.exit_code
        self.ended_at = time.time()
        if reaped.killed:
            self.notes.append(f"{len(reaped.killed)} leftover processes were killed")
        if reaped.remaining:
            shown = ", ".join(f"{pid} ({name})" for pid, name in reaped.remaining)
            self.notes.append(f"these processes could not be killed and may remain: {shown}")
        if reaped.note:
            self.notes.append(reaped.note)
        if self.sink.errors:
            self.notes.extend(self.sink.errors)
        if self.prep is not None:
            cwd = os.path.join(self.root, self.cwd)
            found = findings(self.prep, self.policy, self.root, cwd, self.last_output(16_384))
            failed = {"exit_code": self.exit_code, **found}
            self.notes += [line.strip("[]") for line in describe(failed).splitlines() if line]
        self.state = STOPPED if self.end_reason else EXITED
        self._notify()

    async def stop(self, reason: str) -> bool:
        """End it: SIGTERM to its whole tree, SIGKILL after the supervisor's grace. False
        if it had ended, or was ending by itself or by another stop (this waits for that)."""
        if not self.running or self.sup is None or self.task is None:
            return False
        first = not self.end_reason and self.sup.exit_code is None
        if first:
            self.end_reason = reason
            self.sup.request(b"T")
        try:
            await asyncio.wait_for(asyncio.shield(self.task), STOP_BOUND_S)
        except TimeoutError:
            self.sup.kill()  # the supervisor kills everything now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.task), STOP_BOUND_S)
        return first

    # --- what the model reads -------------------------------------------------------

    def read_new(self, ctx: ToolContext, cap: int) -> dict[str, Any]:
        """What the model has not read yet: the artifact from ``seen`` on, ``cap`` bytes at
        most (cut at a line's end when more follows). Past the artifact's cap, the output
        is not kept: its last part is given instead, once per new output."""
        with output.open_artifact(ctx, self.output_id) as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(self.seen)
            data = handle.read(min(cap, size - self.seen)) if size > self.seen else b""
        start = self.seen
        more = start + len(data) < size
        if more and (cut := data.rfind(b"\n")) >= 0:
            data = data[: cut + 1]
        self.seen += len(data)
        text = data.decode("utf-8", "replace")
        sink = self.sink
        beyond = sink is not None and sink.total > sink.written and not more
        if beyond and sink is not None and sink.total > self.seen_total:
            kept = f"{sink.written // (1024 * 1024)} MiB"
            text += f"\n…[its output passed {kept}, which is all that is kept; its last part:]\n"
            text += self.last_output(min(cap // 2, 8192))
        if not more:
            self.seen_total = self.output_bytes
        return {
            "id": self.id, "job": self.brief(), "from_byte": start, "next_byte": self.seen,
            "unread_bytes": max(0, size - self.seen), "total_bytes": self.output_bytes or size,
            "content": text,
        }  # fmt: skip

    def brief(self) -> dict[str, Any]:
        """Its state, as a read_output or stop_job result carries it."""
        out: dict[str, Any] = {"id": self.id, "command": self.command, "state": self.state}
        out["words"] = self.words()
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def started_data(self, args: CommandArgs, began: float) -> dict[str, Any]:
        """run_command's result for it: its first output, and how to read on."""
        assert self.sink is not None
        sink = self.sink
        shown = bytes(sink.head)
        if sink.total > len(shown) and (cut := shown.rfind(b"\n")) >= 0:
            shown = shown[: cut + 1]
        self.seen = min(len(shown), sink.written)
        self.seen_total = sink.total if self.seen == sink.total else self.seen
        data: dict[str, Any] = {
            "command": args.shown, "cwd": args.cwd, "background": True, "job_id": self.id,
            "state": self.state, "words": self.words(), "output": shown.decode("utf-8", "replace"),
            "output_bytes": sink.total, "unread_bytes": sink.total - len(shown),
            "output_id": self.output_id, "duration_ms": int((time.monotonic() - began) * 1000),
        }  # fmt: skip
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.notes:
            data["notes"] = list(self.notes)
        if self.prep is not None and self.prep.info:
            data["sandbox"] = self.prep.info
        return data


class JobTable:
    """One session's background jobs, by number."""

    def __init__(self, limit: int = MAX_RUNNING) -> None:
        self.limit = limit
        self.jobs: dict[int, Job] = {}
        self.next_number = 1
        self.starting = 0
        self.on_end: OnEnd | None = None  # the host's: records each end

    def seed(self, known: Iterable[Job]) -> None:
        """The session's earlier jobs (ended): their output stays readable, and numbers
        go on after theirs."""
        for job in known:
            self.jobs.setdefault(job.number, job)
            self.next_number = max(self.next_number, job.number + 1)

    def get(self, text: str) -> Job | None:
        number = parse_id(text)
        return self.jobs.get(number) if number is not None else None

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.running]

    def all(self) -> list[Job]:
        return [self.jobs[n] for n in sorted(self.jobs)]

    def _reserve(self) -> int:
        if len(self.running()) + self.starting >= self.limit:
            raise Refused(
                RefusalCode.TOO_LARGE,
                f"{self.limit} background jobs are running already, the most a session runs",
                "stop one you no longer need with stop_job, then start this one",
            )
        number, self.next_number = self.next_number, self.next_number + 1
        self.starting += 1
        return number

    async def start(self, ctx: ToolContext, args: CommandArgs, rel: RelPath) -> ToolResult:
        """Start ``args`` as a job and return once its first output is in."""
        from tools.command import NAME, begin, launch

        number = self._reserve()
        try:
            dir_fd = await asyncio.to_thread(ctx.workspace.open_dir, rel)
            began = time.monotonic()
            sup, sink, prep = launch(ctx, args, dir_fd)
            job = Job(number, args.shown, args.cwd, sink.artifact_id)
            job.sup, job.sink, job.prep = sup, sink, prep
            job.policy, job.root = ctx.sandbox, ctx.workspace.root
            try:  # nothing awaited between the spawn and here: a cancel cannot orphan it
                extra = {"job": job.id, "command": args.shown, "cwd": args.cwd}
                await begin(ctx, args, (sup, sink, prep), extra | {"sandbox": dict(prep.info)})
            except BaseException:
                await _discard(job)
                raise
        finally:
            self.starting -= 1
        self.jobs[number] = job
        job.live = ctx.on_output
        job.task = asyncio.create_task(job.run(self.on_end), name=job.id)
        try:
            await job.gather(0, FIRST_WAIT_S, FIRST_BYTES)
        except BaseException:  # its call was cancelled (an interrupt): the job goes with it
            job.live = None
            with contextlib.suppress(Exception):
                await asyncio.shield(job.stop("its call was interrupted"))
            raise
        job.live = None
        return ToolResult.success(NAME, job.started_data(args, began))

    async def stop_all(self, reason: str) -> list[Job]:
        """Stop every running job (at once); the jobs that were running."""
        jobs = self.running()
        await asyncio.gather(*(job.stop(reason) for job in jobs), return_exceptions=True)
        return jobs

    async def read(self, ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
        """read_output of a job: what it printed that the model has not read yet (or a
        page or search of all of it: `offset`, `pattern`), after waiting up to `wait`."""
        job = self.get(str(raw_args["id"]))
        if job is None:
            raise unknown_job(str(raw_args["id"]))
        wait = min(float(raw_args.get("wait", 0)), MAX_WAIT_S)
        cap = ctx.limits.max_output_bytes
        if "offset" not in raw_args and "pattern" not in raw_args:
            if wait > 0 and job.seen >= output.artifact_size(ctx, job.output_id):
                await job.gather(job.seen_total, wait, cap)
            return ToolResult.success(output.NAME, job.read_new(ctx, cap))
        if wait > 0:
            await job.gather(job.seen_total, wait, cap)
        args = {k: v for k, v in raw_args.items() if k != "wait"} | {"id": job.output_id}
        page = await asyncio.to_thread(output.read_output, ctx, args)
        return ToolResult.success(output.NAME, page.data | {"id": job.id, "job": job.brief()})

    async def stop(self, text: str, why: str) -> dict[str, Any] | None:
        """stop_job: the job's state after the stop (``stopped``: whether this stop ended
        it), or None if this session has no such job."""
        job = self.get(text)
        if job is None:
            return None
        stopped = await job.stop(why)
        return {**job.brief(), "stopped": stopped, "last_output": job.last_output()}

    def kill_all(self, reason: str = "bastion closed the session") -> None:
        """Close every running job's lifeline: its supervisor kills its whole tree now.
        Synchronous, for a close that cannot wait (the ends are recorded if the loop
        runs on; the processes go either way)."""
        for job in self.running():
            job.end_reason = job.end_reason or reason
            if job.sup is not None:
                job.sup.kill()


async def _discard(job: Job) -> None:
    """A job that did not start (refused, or its record failed): nothing of it stays."""
    assert job.sup is not None and job.sink is not None and job.prep is not None
    job.sup.kill()
    with contextlib.suppress(Exception):
        await asyncio.shield(job.sup.finished())
    job.sink.abandon()
    job.sup.close()
    job.prep.cleanup()
