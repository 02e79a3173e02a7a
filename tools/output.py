"""Spilled command output: artifacts written by run_command, paged by read_output."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from tools.context import ToolContext
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded

NAME = "read_output"
DESCRIPTION = (
    "Page through the full output of an earlier run_command whose output was too "
    "long to show (its result names the `id`). `offset` is the first line (1-based), "
    "`limit` the number of lines (default 2000). With `pattern` (an RE2 regex, or text "
    "with `literal: true`) only the matching lines from `offset` on, with their numbers. "
    "For a background job (`id`: its job_id), without offset or pattern: what it printed "
    "that you have not read yet, and whether it still runs or its exit code; `wait` "
    "(seconds, at most 30) waits that long for new output or its end first."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {
            "type": "string",
            "description": "The output id from run_command, or a background job's job_id.",
        },
        "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Lines to return."},
        "pattern": {"type": "string", "description": "Only lines matching this regex."},
        "literal": {"type": "boolean", "description": "pattern is plain text."},
        "wait": {
            "type": "number",
            "minimum": 0,
            "description": "A job only: seconds to wait for new output or its end (max 30).",
        },
    },
    "required": ["id"],
    "additionalProperties": False,
}
ID_PATTERN = re.compile(r"out_[0-9a-f]{32}\Z")
JOB_PATTERN = re.compile(r"job_[1-9][0-9]{0,5}\Z")
MAX_WAIT_S = 30.0  # `wait` (a job's) is capped here
DEFAULT_LIMIT = 2000
MAX_LINE = 8 * 1024


def artifacts_dir(ctx: ToolContext) -> str:
    """The host's artifacts directory, or a private per-user one in the temp dir."""
    if ctx.artifacts_dir is not None:
        return os.fspath(ctx.artifacts_dir)
    import tempfile  # only when the host gave no directory

    path = os.path.join(tempfile.gettempdir(), f"bastion-artifacts-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise Refused(
            RefusalCode.INTERNAL,
            "the default artifacts directory is unusable",
            "configure an artifacts directory for the host",
        )
    return path


def new_artifact(ctx: ToolContext) -> tuple[str, int]:
    """Create an empty artifact; returns (id, writable fd)."""
    directory = artifacts_dir(ctx)
    os.makedirs(directory, exist_ok=True)
    artifact_id = "out_" + os.urandom(16).hex()
    fd = os.open(
        os.path.join(directory, f"{artifact_id}.log"),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    return artifact_id, fd


def discard_artifact(ctx: ToolContext, artifact_id: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(artifacts_dir(ctx), f"{artifact_id}.log"))


HEAD_BYTES = 16 * 1024
TAIL_BYTES = 16 * 1024


def excerpt(head: bytes, tail: bytes, total: int) -> str:
    """What the model is shown of an output: all of it, or its head and tail with
    the number of bytes between."""
    omitted = total - len(head) - len(tail)
    if omitted <= 0:
        return (head + tail).decode("utf-8", "replace")
    return (
        head.decode("utf-8", "replace")
        + f"\n…[{omitted} bytes omitted; page the full output with read_output]…\n"
        + tail.decode("utf-8", "replace")
    )


class OutputSoFar:
    """A running command's output as ``on_output`` delivers it, kept bounded for a
    host that commits it at its checkpoint cadence: the first and last 16 KiB (in
    characters) and the count of what came between. ``feed`` is an ``on_output``."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_cap, self.tail_cap = head, tail
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, text: str) -> None:
        self.total += len(text)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_cap :]

    def text(self) -> str:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return self.head + self.tail
        return f"{self.head}\n…[{omitted} characters omitted]…\n{self.tail}"


def artifact_excerpt(ctx: ToolContext, artifact_id: str) -> tuple[str, int] | None:
    """The output a command wrote to its artifact before it was interrupted (a crash
    of bastion, say; the artifact is written as the output arrives): its excerpt and
    total size, or None if there is no such artifact."""
    if not ID_PATTERN.match(artifact_id):
        return None
    try:
        fd = os.open(
            os.path.join(artifacts_dir(ctx), f"{artifact_id}.log"),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        total = os.fstat(handle.fileno()).st_size
        head = handle.read(HEAD_BYTES)
        handle.seek(max(len(head), total - TAIL_BYTES))
        tail = handle.read(TAIL_BYTES)
    return excerpt(head, tail, total), total


@dataclass(frozen=True, slots=True)
class OutputArgs:
    id: str
    offset: int = 1
    limit: int = DEFAULT_LIMIT
    pattern: str | None = None
    literal: bool = False

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> OutputArgs:
        return cls(
            args["id"], args.get("offset", 1), args.get("limit", DEFAULT_LIMIT),
            args.get("pattern"), bool(args.get("literal", False)),
        )  # fmt: skip


def unknown(artifact_id: str) -> Refused:
    shown = artifact_id if ID_PATTERN.match(artifact_id) else "(malformed id)"
    return Refused(
        RefusalCode.SPILL_REFERENCE_UNKNOWN,
        f"no spilled output with id {shown}",
        "use the exact id from a run_command result in this session, or re-run it",
    )


def unknown_job(text: str) -> Refused:
    shown = text if JOB_PATTERN.match(text) else "(malformed id)"
    return Refused(
        RefusalCode.SPILL_REFERENCE_UNKNOWN,
        f"no background job {shown} in this session",
        "use the exact job_id a run_command with background: true returned in this session",
    )


def read_output(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = OutputArgs.from_dict(raw_args)
    if not ID_PATTERN.match(args.id):
        raise unknown(args.id)
    if args.pattern is not None:
        return _search(ctx, args)
    try:
        fd = os.open(
            os.path.join(artifacts_dir(ctx), f"{args.id}.log"),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except OSError:
        raise unknown(args.id) from None
    cap = ctx.limits.max_output_bytes
    lines: list[str] = []
    used = 0
    number = 0
    more = False
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise unknown(args.id)
        total = os.fstat(handle.fileno()).st_size
        for number, raw in enumerate(handle, 1):
            if number < args.offset:
                continue
            text = raw.rstrip(b"\n")[:MAX_LINE].decode("utf-8", "replace")
            if len(lines) >= args.limit or (lines and used + len(text) + 1 > cap):
                more = True
                break
            lines.append(text)
            used += len(text) + 1
    if args.offset > max(number, 1):
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"offset {args.offset} is past the end ({number} lines)",
            f"use an offset between 1 and {max(number, 1)}",
        )
    last = args.offset + len(lines) - 1
    return ToolResult.success(
        NAME,
        {
            "id": args.id,
            "offset": args.offset,
            "lines_returned": len(lines),
            "next_offset": last + 1 if more else None,
            "total_bytes": total,
            "content": "\n".join(lines),
        },
    )


def open_artifact(ctx: ToolContext, artifact_id: str) -> Any:
    """The artifact, read-only (an id that names no regular file: `unknown`)."""
    try:
        fd = os.open(
            os.path.join(artifacts_dir(ctx), f"{artifact_id}.log"),
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
        )
    except OSError:
        raise unknown(artifact_id) from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise unknown(artifact_id)
    return handle


def _search(ctx: ToolContext, args: OutputArgs) -> ToolResult:
    """The lines of the artifact from `offset` on that match `pattern`, numbered (the
    same id check as paging: only an artifact of this session's commands is read)."""
    from tools.regex import compile_pattern

    regex = compile_pattern(args.pattern or "", literal=args.literal)
    cap = ctx.limits.max_output_bytes
    found: list[str] = []
    used = number = 0
    next_offset: int | None = None
    with open_artifact(ctx, args.id) as handle:
        total = os.fstat(handle.fileno()).st_size
        for number, raw in enumerate(handle, 1):
            if number < args.offset:
                continue
            line = raw.rstrip(b"\n")[:MAX_LINE]
            if regex.search(line) is None:
                continue
            text = f"{number}: {line.decode('utf-8', 'replace')}"
            if len(found) >= args.limit or (found and used + len(text) + 1 > cap):
                next_offset = number
                break
            found.append(text)
            used += len(text) + 1
    return ToolResult.success(
        NAME,
        {
            "id": args.id, "pattern": args.pattern, "offset": args.offset,
            "matches": len(found), "next_offset": next_offset, "lines_read": number,
            "total_bytes": total, "content": "\n".join(found),
        },
    )  # fmt: skip


def format_text(data: dict[str, Any]) -> str:
    job = data.get("job")
    text = _page_text(data) if "content" in data and "from_byte" not in data else data["content"]
    if not isinstance(job, dict):
        return text
    footer = f"[{job['id']} (`{job['command']}`): {job['words']}"
    if data.get("unread_bytes"):
        footer += f"; {data['unread_bytes']} more bytes not read yet: read_output again"
    elif job["state"] == "running" and "from_byte" in data:
        footer += '; nothing more yet (add "wait": seconds to wait for it)'
    footer += "]"
    notes = "".join(f"\n[{note}]" for note in job.get("notes") or ())
    return f"{text.rstrip()}\n{footer}{notes}" if text.strip() else f"{footer}{notes}"


def _page_text(data: dict[str, Any]) -> str:
    if "pattern" in data:
        footer = f"[{data['id']}: {data['matches']} matching line(s) of {data['pattern']!r}"
        if data.get("next_offset"):
            footer += f"; more follow: read_output with offset={data['next_offset']}"
        return f"{data['content']}\n{footer}]" if data["content"] else f"{footer}]"
    footer = f"[{data['id']}: lines {data['offset']}-{data['offset'] + data['lines_returned'] - 1}"
    if data.get("next_offset"):
        footer += f"; more follows: read_output with offset={data['next_offset']}"
    return f"{data['content']}\n{footer}]"


def artifact_size(ctx: ToolContext, artifact_id: str) -> int:
    with open_artifact(ctx, artifact_id) as handle:
        return int(os.fstat(handle.fileno()).st_size)


async def run(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    """An `out_…` id pages in a worker thread; a job's id reads here (it may wait)."""
    if not str(raw_args.get("id", "")).startswith("job_"):
        return await offloaded(NAME, read_output)(ctx, raw_args)
    try:
        if ctx.jobs is None:
            raise unknown_job(str(raw_args["id"]))
        return await ctx.jobs.read(ctx, raw_args)
    except Refused as exc:
        return ToolResult.from_refused(NAME, exc)
    except OSError as exc:
        return ToolResult.refused(
            NAME, RefusalCode.INTERNAL, f"read_output failed: {exc.strerror or exc}",
            "retry once; if it fails again, try another approach",
        )  # fmt: skip


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=True,
    replay_safe=True,
    run=run,
    run_sync=read_output,
)
