"""run_command: a shell string or an argv, in its own process group, bounded.

The cwd is pinned: the child starts in the directory the workspace descriptor
resolved (Linux: ``/proc/self/fd/N`` with N passed to the child; macOS: fchdir
before exec). The command runs under a supervisor (``tools/reaper.py``) that
kills everything it started, even after ``setsid``, when it exits, times out or
is cancelled, and when bastion dies. ``ctx.on_start`` is given a record that
``tools.reaper.reap`` can use after a crash. Output keeps a head and a tail
inline and spills everything to an artifact that read_output pages.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools import output
from tools.context import Access, ToolContext
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef

if TYPE_CHECKING:
    from tools.lifetime import ReapResult, Supervised
    from tools.sandbox_run import Prepared

# The supervisor (tools.lifetime) and the sandbox (tools.sandbox_run) load when a
# command first runs: a session that runs none, such as `bastion -p` answering in
# words, does not pay for them (issue 28).

NAME = "run_command"
DESCRIPTION = (
    "Run a command in the workspace: `command` is a bash script string, or `argv` a "
    "program and its arguments (no shell). `cwd` is workspace-relative (default the "
    "root). Times out after `timeout_ms` (default 120000, max 600000), killing the "
    "whole process group. stdout and stderr are merged; long output shows its head "
    "and tail and the rest can be paged with read_output using the returned `output_id`. "
    "With `background: true` (a dev server, a watcher) it returns after its first output "
    "with a `job_id` and keeps running: read more with read_output (`id`: the job id, "
    "`wait`: seconds to wait for new output), stop it with stop_job. A background job "
    "ends when this session does; timeout_ms does not apply to it."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "A bash command line."},
        "argv": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "Program and arguments, run without a shell.",
        },
        "cwd": {"type": "string", "description": "Workspace-relative directory."},
        "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600_000},
        "background": {
            "type": "boolean",
            "description": "Keep it running as a job and return after its first output.",
        },
    },
    "additionalProperties": False,
}
DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
DRAIN_S = 1.0
ENV_KEEP = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SHELL",
)


@dataclass(frozen=True, slots=True)
class CommandArgs:
    argv: tuple[str, ...]
    shown: str
    cwd: str = "."
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    background: bool = False

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> CommandArgs:
        command, argv = args.get("command"), args.get("argv")
        if (command is None) == (argv is None):
            raise Refused(
                RefusalCode.INVALID_ARGUMENT,
                "give exactly one of command or argv",
                "use command for a shell line, argv for a program and its arguments",
            )
        parts = ("bash", "-c", command) if command is not None else tuple(argv or ())
        if not parts or not parts[0] or any("\x00" in p for p in parts):
            raise Refused(
                RefusalCode.INVALID_ARGUMENT,
                "the command is empty or contains NUL",
                "give a non-empty command without NUL characters",
            )
        timeout = int(args.get("timeout_ms", DEFAULT_TIMEOUT_MS))
        if not 1 <= timeout <= MAX_TIMEOUT_MS:
            raise Refused(
                RefusalCode.INVALID_ARGUMENT,
                "timeout_ms is out of range",
                f"use 1..{MAX_TIMEOUT_MS}",
            )
        shown = command if command is not None else " ".join(parts)
        background = bool(args.get("background", False))
        return cls(parts, shown, args.get("cwd", "."), timeout, background)


def default_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "NO_COLOR": "1"})
    return env


class Sink:
    """Keeps the head and tail in memory and every byte (up to a cap) in an artifact."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.artifact_id, self.fd = output.new_artifact(ctx)
        self.written = 0
        self.spilling = True  # the artifact is written (until a write fails: ENOSPC)
        self.errors: list[str] = []  # what failed while the output was read (pump)

    def take(self, chunk: bytes) -> None:
        """A chunk as the pump reads it: kept in memory, and in the artifact while that
        can be written (a failed write stops the spilling and is noted in `errors`)."""
        self.feed(chunk)
        if self.spilling:
            try:
                self.write(chunk)
            except OSError as exc:
                self.spilling = False
                self.errors.append(f"saving the full output failed ({exc.strerror or exc})")

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = output.HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * output.TAIL_BYTES:
                del self.tail[: len(self.tail) - output.TAIL_BYTES]

    def abandon(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        output.discard_artifact(self.ctx, self.artifact_id)

    def write(self, chunk: bytes) -> None:
        keep = MAX_ARTIFACT_BYTES - self.written
        if keep > 0 and self.fd >= 0:
            os.write(self.fd, chunk[:keep])
            self.written += min(len(chunk), keep)

    def finish(self) -> dict[str, Any]:
        os.close(self.fd)
        self.fd = -1
        truncated = self.total > output.HEAD_BYTES + output.TAIL_BYTES
        tail = bytes(self.tail[-output.TAIL_BYTES :] if truncated else self.tail)
        data: dict[str, Any] = {
            "output": output.excerpt(bytes(self.head), tail, self.total),
            "truncated": truncated,
            "output_bytes": self.total,
            "output_id": self.artifact_id if truncated else None,
        }
        if not truncated:
            output.discard_artifact(self.ctx, self.artifact_id)
        elif self.written < self.total:
            data["artifact_dropped_bytes"] = self.total - self.written
        if self.errors:
            data["output_error"] = "; ".join(self.errors)
        return data


def spawn_options(dir_fd: int) -> dict[str, Any]:
    if sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd"):
        return {"cwd": f"/proc/self/fd/{dir_fd}", "pass_fds": (dir_fd,)}
    if sys.platform == "darwin":
        return {"preexec_fn": lambda: os.fchdir(dir_fd)}
    raise Refused(
        RefusalCode.FORBIDDEN,
        "run_command cannot pin its cwd on this platform",
        "commands run only on Linux and macOS",
    )


async def pump(stream: asyncio.StreamReader, sink: Sink) -> None:
    """Every byte goes to the sink; ``on_output`` gets all of it as text, in pieces
    of at most 64 KiB, the last one flushed when the stream ends.

    The pipe is read to its end whatever fails: a spill write that fails (ENOSPC)
    stops the spilling and a raising ``on_output`` is not called again, each noted
    in ``sink.errors`` for the result; a pump that stopped reading would leave the
    command blocked on a full pipe until its timeout."""
    live = sink.ctx.on_output
    decoder = codecs.getincrementaldecoder("utf-8")("replace") if live else None
    while chunk := await stream.read(1 << 16):
        sink.take(chunk)
        if live is not None and decoder is not None and (text := decoder.decode(chunk)):
            live = deliver(live, text, sink)
    if live is not None and decoder is not None and (rest := decoder.decode(b"", final=True)):
        deliver(live, rest, sink)


def deliver(live: Any, text: str, sink: Sink) -> Any:
    """``live(text)``; None (never called again) if it raised, noted in ``sink.errors``."""
    try:
        live(text)
    except Exception as exc:
        sink.errors.append(f"showing the output live failed ({type(exc).__name__}: {exc})")
        return None
    return live


async def announce(ctx: ToolContext, record: dict[str, Any]) -> None:
    if ctx.on_start is not None:
        pending = ctx.on_start(record)
        if inspect.isawaitable(pending):
            await pending


async def supervise(sup: Supervised, sink: Sink, timeout_s: float) -> tuple[bool, ReapResult]:
    """Wait for the command's exit or its timeout; either way the supervisor then
    kills everything it started. Returns (timed out, what was killed or remains)."""
    reader = asyncio.ensure_future(pump(sup.output, sink))
    try:
        timed_out = not await sup.exited(timeout_s)
        if timed_out:
            sup.request(b"T")
        reaped = await sup.finished()
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_S)
        except TimeoutError:
            reader.cancel()
    except BaseException:
        sup.kill()
        reader.cancel()
        with contextlib.suppress(Exception):
            await asyncio.shield(sup.finished())
        raise
    return timed_out, reaped


def launch(ctx: ToolContext, args: CommandArgs, dir_fd: int) -> tuple[Supervised, Sink, Prepared]:
    """Start the command's supervisor (synchronously: see tools/lifetime.py), its output
    artifact and its sandbox; ``dir_fd`` is closed either way. The caller enters its
    ``try`` at once, with nothing awaited in between."""
    from tools.lifetime import Supervised
    from tools.sandbox_run import prepare

    env = dict(ctx.env) if ctx.env is not None else default_env()
    try:
        sink = Sink(ctx)
        prep = prepare(ctx.sandbox, ctx.workspace.root, args.argv, env, ctx.proxy)
        sup = Supervised.spawn(prep.argv, env, spawn_options(dir_fd), prep.entries)
    except BaseException:
        if "prep" in locals():
            prep.cleanup()
        if "sink" in locals():
            sink.abandon()
        raise
    finally:
        os.close(dir_fd)
    return sup, sink, prep


async def begin(
    ctx: ToolContext,
    args: CommandArgs,
    started: tuple[Supervised, Sink, Prepared],
    extra: dict[str, Any] | None = None,
) -> None:
    """The command runs: its first report read, the sandbox checked, and its process
    record (with ``extra``) handed to ``ctx.on_start``. Refused if it did not start."""
    from tools.sandbox_run import applied

    sup, sink, prep = started
    await sup.connect()
    first = await sup.started()
    refuse_unstarted(args, first)
    applied(prep, sup.sandbox)
    await announce(ctx, sup.record(sink.artifact_id, prep.tmpdir) | (extra or {}))


async def execute(ctx: ToolContext, args: CommandArgs, dir_fd: int) -> ToolResult:
    sup, sink, prep = launch(ctx, args, dir_fd)
    started = time.monotonic()
    try:  # nothing awaited between the spawn and here: a cancel cannot orphan it
        await begin(ctx, args, (sup, sink, prep))
        timed_out, reaped = await supervise(sup, sink, args.timeout_ms / 1000)
    except BaseException:
        sup.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(sup.finished())
        sink.abandon()
        raise
    finally:
        sup.close()
        prep.cleanup()
    data = result_data(ctx, args, sup, sink, (timed_out, reaped), prep)
    data["duration_ms"] = int((time.monotonic() - started) * 1000)
    if timed_out:
        raise Refused(
            RefusalCode.TIMEOUT,
            f"the command ran past {args.timeout_ms} ms; "
            + ("it was killed with everything it started" if reaped.clean else LEFT),
            f"raise timeout_ms (max {MAX_TIMEOUT_MS}) or run something shorter",
            data,
        )
    return ToolResult.success(NAME, data)


def refuse_unstarted(args: CommandArgs, first: dict[str, Any]) -> None:
    if "spawn_error" in first:
        raise Refused(
            RefusalCode.NOT_FOUND,
            f"cannot run {args.argv[0]!r}: {first.get('message')}",
            "check the program name, or use `command` to run it through bash",
        )
    if "sandbox_error" in first:
        raise Refused(
            RefusalCode.FORBIDDEN,
            f"the sandbox could not be applied, so the command did not run: {first['sandbox_error']}",
            "tell the user; they can run bastion with --sandbox danger-full-access",
        )


def result_data(
    ctx: ToolContext,
    args: CommandArgs,
    sup: Supervised,
    sink: Sink,
    ended: tuple[bool, ReapResult],
    prep: Prepared,
) -> dict[str, Any]:
    timed_out, reaped = ended
    data: dict[str, Any] = {
        "command": args.shown,
        "cwd": args.cwd,
        "exit_code": sup.exit_code,
        "duration_ms": 0,
        "timed_out": timed_out,
        **sink.finish(),
        **lifetime(reaped),
    }
    if sup.exit_code is not None and sup.exit_code < 0:
        data["signal"] = -sup.exit_code
    cwd = os.path.join(ctx.workspace.root, args.cwd)
    from tools.sandbox_run import findings

    data.update(findings(prep, ctx.sandbox, ctx.workspace.root, cwd, data["output"]))
    return data


LEFT = "it was killed, but see remaining_processes and process_note"


def lifetime(reaped: ReapResult) -> dict[str, Any]:
    """What the result says about processes: how many the end of the call killed
    (background ones), and any that may remain, with the reason."""
    data: dict[str, Any] = {}
    if reaped.killed:
        data["processes_killed"] = len(reaped.killed)
    if reaped.remaining:
        data["remaining_processes"] = [list(p) for p in reaped.remaining]
    if reaped.note:
        data["process_note"] = reaped.note
    return data


async def run_command(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    try:
        args = CommandArgs.from_dict(raw_args)
        ws = ctx.workspace
        rel = ws.parse(args.cwd, field="cwd")
        ws.authorize(rel, Access.READ, ctx.authorize_path)
        if args.background:
            if ctx.jobs is None:
                raise Refused(
                    RefusalCode.FORBIDDEN,
                    "background jobs run only in a bastion session",
                    "run the command without background",
                )
            return await ctx.jobs.start(ctx, args, rel)
        dir_fd = await asyncio.to_thread(ws.open_dir, rel)
        return await execute(ctx, args, dir_fd)
    except Refused as exc:
        return ToolResult.from_refused(NAME, exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return ToolResult.refused(
            NAME,
            RefusalCode.INTERNAL,
            f"run_command failed: {detail}",
            "retry once; if it fails again, try another approach",
        )


def format_text(data: dict[str, Any]) -> str:
    if data.get("background"):
        return format_started(data)
    if data.get("signal"):
        status = f"killed by signal {data['signal']}"
    elif data.get("exit_code") is not None:
        status = f"exit {data['exit_code']}"
    else:
        status = "no exit code"
    head = f"$ {data['command']}\n[{status}, {data['duration_ms']} ms"
    if data.get("truncated"):
        head += f", {data['output_bytes']} bytes, full output id {data['output_id']}"
    if data.get("processes_killed"):
        head += f", {data['processes_killed']} leftover processes killed"
    text = f"{head}]\n{data['output']}".rstrip()
    if data.get("remaining_processes"):
        shown = ", ".join(f"{pid} ({name})" for pid, name in data["remaining_processes"])
        text += f"\n[these processes could not be killed and may remain: {shown}]"
    if data.get("process_note"):
        text += f"\n[{data['process_note']}]"
    if data.get("output_error"):
        text += f"\n[{data['output_error']}]"
    from tools.sandbox_run import describe

    if extra := describe(data):
        text += f"\n{extra}"
    return text


def format_started(data: dict[str, Any]) -> str:
    """The text for a background job it started (tools/jobs.py)."""
    from tools.sandbox_run import describe

    job = data["job_id"]
    head = f"$ {data['command']}\n[background job {job}: {data['words']}"
    if data["state"] == "running":
        head += f"; {data['output_bytes']} bytes of output so far]"
    else:
        head += f" within {data['duration_ms']} ms]"
    text = f"{head}\n{data['output']}".rstrip()
    if data.get("unread_bytes"):
        text += f"\n[{data['unread_bytes']} more bytes not shown yet]"
    for note in data.get("notes") or ():
        text += f"\n[{note}]"
    if extra := describe({"sandbox": data.get("sandbox") or {}}):
        text += f"\n{extra}"
    if data["state"] == "running":
        text += (
            f'\n[it keeps running: read_output {{"id": "{job}"}} gives what it prints next '
            f'(add "wait": seconds to wait for it), stop_job {{"id": "{job}"}} stops it; it '
            "ends when this session does]"
        )
    return text


register_formatter(NAME, format_text)
TOOL = ToolDef(NAME, DESCRIPTION, PARAMETERS, read_only=False, replay_safe=False, run=run_command)
