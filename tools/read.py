"""read_file: a page of a UTF-8 text file with numbered lines, or an image."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tools.context import Access, ToolContext
from tools.digest import sha256
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.workspace import RelPath

NAME = "read_file"
DESCRIPTION = (
    "Read a text file in the workspace. Returns numbered lines (`offset` is the first "
    "line, 1-based; `limit` the number of lines, default 2000) and the sha256 of the "
    "whole file, which edit_file accepts as `expected_sha256`. Long files come back in "
    "pages: continue with the `next_offset` given. Images (png, jpeg, gif, webp, bmp) "
    "come back as an image. Binary files are refused."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Workspace-relative path, '/' separated."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Lines to return."},
    },
    "required": ["path"],
    "additionalProperties": False,
}

DEFAULT_LIMIT = 2000
BYTE_CAP = 256 * 1024
MAX_TEXT_FILE = 32 * 1024 * 1024
MAX_IMAGE_FILE = 64 * 1024 * 1024
IMAGE_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "bmp": "image/bmp",
}


@dataclass(frozen=True, slots=True)
class ReadArgs:
    path: str
    offset: int = 1
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> ReadArgs:
        return cls(args["path"], args.get("offset", 1), args.get("limit", DEFAULT_LIMIT))


def read_all(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = max(size, 0) + 1
    while True:
        chunk = os.read(fd, max(remaining, 1 << 16))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        remaining -= len(chunk)


def load_text(ctx: ToolContext, rel: RelPath, access: Access) -> tuple[str, bytes, os.stat_result]:
    """Authorize, open and decode a UTF-8 file; shared with edit_file."""
    ctx.workspace.authorize(rel, access, ctx.authorize_path)
    fd, st = ctx.workspace.open_file(rel)
    try:
        if st.st_size > MAX_TEXT_FILE:
            raise Refused(
                RefusalCode.TOO_LARGE,
                f"'{rel.text}' is {st.st_size} bytes (limit {MAX_TEXT_FILE})",
                "use search_files to find the part you need, or run_command with head/sed",
            )
        raw = read_all(fd, st.st_size)
    finally:
        os.close(fd)
    if b"\x00" in raw[:8192]:
        raise binary(rel, "it contains NUL bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise binary(rel, f"invalid UTF-8 at byte {exc.start}") from None
    return text, raw, st


def binary(rel: RelPath, why: str) -> Refused:
    return Refused(
        RefusalCode.INVALID_ARGUMENT,
        f"'{rel.text}' is not UTF-8 text ({why})",
        "inspect it with run_command (e.g. `file`, `xxd | head`) instead",
    )


def split_lines(text: str) -> list[str]:
    """Split on LF only (never on U+2028 and friends); a final newline adds no line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def page(lines: list[str], offset: int, limit: int) -> tuple[list[str], int, bool]:
    """Numbered lines from ``offset``; returns (rendered, count, cut_by_bytes)."""
    out: list[str] = []
    used = 0
    end = min(len(lines), offset - 1 + limit)
    for number in range(offset, end + 1):
        line = lines[number - 1].rstrip("\r")
        rendered = f"{number:>6}\t{line}"
        size = len(rendered.encode("utf-8", "replace")) + 1
        if used + size > BYTE_CAP:
            if not out:
                cut = rendered.encode("utf-8", "replace")[: BYTE_CAP - 64]
                out.append(cut.decode("utf-8", "ignore") + " …[line truncated]")
            return out, len(out), True
        out.append(rendered)
        used += size
    return out, len(out), False


def read_text(ctx: ToolContext, rel: RelPath, args: ReadArgs) -> ToolResult:
    text, raw, _ = load_text(ctx, rel, Access.READ)
    lines = split_lines(text)
    total = len(lines)
    if args.offset > max(total, 1):
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"offset {args.offset} is past the end of '{rel.text}' ({total} lines)",
            f"use an offset between 1 and {max(total, 1)}",
        )
    rendered, count, cut = page(lines, args.offset, args.limit)
    last = args.offset + count - 1
    next_offset = last + 1 if last < total else None
    return ToolResult.success(
        NAME,
        {
            "path": rel.text,
            "sha256": sha256(raw),
            "total_lines": total,
            "offset": args.offset,
            "lines_returned": count,
            "next_offset": next_offset,
            "truncated": cut,
            "content": "\n".join(rendered),
        },
    )


def read_image(ctx: ToolContext, rel: RelPath) -> ToolResult:
    from tools.images import encode_image

    ctx.workspace.authorize(rel, Access.READ, ctx.authorize_path)
    fd, st = ctx.workspace.open_file(rel)
    try:
        if st.st_size > MAX_IMAGE_FILE:
            raise Refused(
                RefusalCode.TOO_LARGE,
                f"'{rel.text}' is {st.st_size} bytes",
                f"images up to {MAX_IMAGE_FILE} bytes can be read",
            )
        raw = read_all(fd, st.st_size)
    finally:
        os.close(fd)
    block, original = encode_image(raw, rel.text)
    data = {
        "path": rel.text,
        "sha256": sha256(raw),
        "media_type": block.media_type,
        "width": block.width,
        "height": block.height,
        "original_width": original[0],
        "original_height": original[1],
    }
    return ToolResult.success(NAME, data, (block,))


def read_file(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = ReadArgs.from_dict(raw_args)
    rel = ctx.workspace.parse(args.path)
    suffix = rel.name.rsplit(".", 1)[-1].lower() if "." in rel.name else ""
    if suffix in IMAGE_TYPES:
        return read_image(ctx, rel)
    return read_text(ctx, rel, args)


def format_text(data: dict[str, Any]) -> str:
    if "media_type" in data:
        return (
            f"[image {data['path']}: {data['width']}x{data['height']} {data['media_type']}, "
            f"original {data['original_width']}x{data['original_height']}]"
        )
    text = str(data.get("content", ""))
    footer = f"[{data['path']}: {data['total_lines']} lines, sha256 {data['sha256']}"
    if data.get("next_offset"):
        footer += f"; more follows: read_file with offset={data['next_offset']}"
    return f"{text}\n{footer}]" if text else f"{footer}; empty]"


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=True,
    replay_safe=True,
    run=offloaded(NAME, read_file),
    run_sync=read_file,
)
