"""run_command: a shell string or an argv, in its own process group, bounded.

The cwd is pinned: the child starts in the directory the workspace descriptor
resolved (Linux: ``/proc/self/fd/N`` with N passed to the child; macOS: fchdir
before exec). Timeout and cancellation kill the whole process group; output
keeps a head and a tail inline and spills everything to an artifact that
read_output pages.

asyncio is imported inside the functions so that ``python -m tools`` running
another tool never pays for it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools.context import Access, ToolContext
from tools.output import discard_artifact, new_artifact
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef

if TYPE_CHECKING:
    import asyncio

NAME = "run_command"
DESCRIPTION = (
    "Run a command in the workspace: `command` is a bash script string, or `argv` a "
    "program and its arguments (no shell). `cwd` is workspace-relative (default the "
    "root). Times out after `timeout_ms` (default 120000, max 600000), killing the "
    "whole process group. stdout and stderr are merged; long output shows its head "
    "and tail and the rest can be paged with read_output using the returned `output_id`."
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
    },
    "additionalProperties": False,
}
DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
HEAD_BYTES = 16 * 1024
TAIL_BYTES = 16 * 1024
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
TERM_GRACE_S = 1.0
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
        return cls(parts, shown, args.get("cwd", "."), timeout)


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
        self.artifact_id, self.fd = new_artifact(ctx)
        self.written = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * TAIL_BYTES:
                del self.tail[: len(self.tail) - TAIL_BYTES]

    def abandon(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        discard_artifact(self.ctx, self.artifact_id)

    def write(self, chunk: bytes) -> None:
        keep = MAX_ARTIFACT_BYTES - self.written
        if keep > 0 and self.fd >= 0:
            os.write(self.fd, chunk[:keep])
            self.written += min(len(chunk), keep)

    def finish(self) -> dict[str, Any]:
        os.close(self.fd)
        self.fd = -1
        truncated = self.total > HEAD_BYTES + TAIL_BYTES
        if not truncated:
            discard_artifact(self.ctx, self.artifact_id)
            text = bytes(self.head + self.tail).decode("utf-8", "replace")
            return {
                "output": text,
                "truncated": False,
                "output_bytes": self.total,
                "output_id": None,
            }
        tail = bytes(self.tail[-TAIL_BYTES:])
        omitted = self.total - len(self.head) - len(tail)
        text = (
            bytes(self.head).decode("utf-8", "replace")
            + f"\n…[{omitted} bytes omitted; page the full output with read_output]…\n"
            + tail.decode("utf-8", "replace")
        )
        data: dict[str, Any] = {
            "output": text,
            "truncated": True,
            "output_bytes": self.total,
            "output_id": self.artifact_id,
        }
        if self.written < self.total:
            data["artifact_dropped_bytes"] = self.total - self.written
        return data


def kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


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
    live = sink.ctx.on_output
    decoder = codecs.getincrementaldecoder("utf-8")("replace") if live else None
    while chunk := await stream.read(1 << 16):
        sink.feed(chunk)
        sink.write(chunk)
        if live is not None and decoder is not None:
            text = decoder.decode(chunk)
            if text:
                live(text)


async def supervise(proc: asyncio.subprocess.Process, sink: Sink, timeout_s: float) -> bool:
    """Wait for exit or timeout; returns True on timeout. Kills the group either way."""
    import asyncio

    assert proc.stdout is not None
    reader = asyncio.ensure_future(pump(proc.stdout, sink))
    timed_out = False
    try:
        if not await exited(proc, timeout_s):
            timed_out = True
            kill_group(proc.pid, signal.SIGTERM)
            await exited(proc, TERM_GRACE_S)
        kill_group(proc.pid, signal.SIGKILL)  # leftovers (grandchildren) go too
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_S)
        except TimeoutError:
            reader.cancel()
    except BaseException:
        kill_group(proc.pid, signal.SIGKILL)
        reader.cancel()
        await asyncio.shield(reap(proc))
        raise
    await proc.wait()
    return timed_out


async def exited(proc: asyncio.subprocess.Process, timeout_s: float) -> bool:
    """Wait until the direct child has exited. Polls ``returncode``: on 3.11,
    ``Process.wait()`` also waits for the pipes, which a background grandchild can
    hold open for ever."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while proc.returncode is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
    return True


async def reap(proc: asyncio.subprocess.Process) -> None:
    import asyncio

    with contextlib.suppress(BaseException):
        await asyncio.wait_for(proc.wait(), 5.0)


async def execute(ctx: ToolContext, args: CommandArgs, dir_fd: int) -> ToolResult:
    import asyncio

    env = dict(ctx.env) if ctx.env is not None else default_env()
    try:
        sink = Sink(ctx)
    except BaseException:
        os.close(dir_fd)
        raise
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *args.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
            **spawn_options(dir_fd),
        )
    except (FileNotFoundError, PermissionError) as exc:
        sink.abandon()
        raise Refused(
            RefusalCode.NOT_FOUND,
            f"cannot run {args.argv[0]!r}: {exc.strerror}",
            "check the program name, or use `command` to run it through bash",
        ) from None
    except BaseException:
        sink.abandon()
        raise
    finally:
        os.close(dir_fd)
    try:
        timed_out = await supervise(proc, sink, args.timeout_ms / 1000)
    except BaseException:
        sink.abandon()
        raise
    data: dict[str, Any] = {
        "command": args.shown,
        "cwd": args.cwd,
        "exit_code": proc.returncode,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "timed_out": timed_out,
        **sink.finish(),
    }
    if proc.returncode is not None and proc.returncode < 0:
        data["signal"] = -proc.returncode
    if timed_out:
        raise Refused(
            RefusalCode.TIMEOUT,
            f"the command ran past {args.timeout_ms} ms and its process group was killed",
            f"raise timeout_ms (max {MAX_TIMEOUT_MS}) or run something shorter",
            data,
        )
    return ToolResult.success(NAME, data)


async def run_command(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    import asyncio

    try:
        args = CommandArgs.from_dict(raw_args)
        ws = ctx.workspace
        rel = ws.parse(args.cwd, field="cwd")
        ws.authorize(rel, Access.READ, ctx.authorize_path)
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
    if data.get("signal"):
        status = f"killed by signal {data['signal']}"
    elif data.get("exit_code") is not None:
        status = f"exit {data['exit_code']}"
    else:
        status = "no exit code"
    head = f"$ {data['command']}\n[{status}, {data['duration_ms']} ms"
    if data.get("truncated"):
        head += f", {data['output_bytes']} bytes, full output id {data['output_id']}"
    return f"{head}]\n{data['output']}".rstrip()


register_formatter(NAME, format_text)
TOOL = ToolDef(NAME, DESCRIPTION, PARAMETERS, read_only=False, replay_safe=False, run=run_command)
