"""edit_file: replace one exact snippet (or every occurrence) in a text file."""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from tools.context import Access, ToolContext
from tools.digest import sha256
from tools.read import load_text, split_lines
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.workspace import RelPath, identity
from tools.write import encode, land

NAME = "edit_file"
DESCRIPTION = (
    "Replace an exact snippet of a text file. `old_text` must occur exactly once "
    "(include surrounding lines to make it unique) unless `replace_all` is true; "
    "`new_text` is inserted literally. Pass the sha256 from read_file as "
    "`expected_sha256` to refuse the edit if the file changed since. Returns a "
    "unified diff and the new sha256."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Workspace-relative path, '/' separated."},
        "old_text": {"type": "string", "description": "Exact text to replace."},
        "new_text": {"type": "string", "description": "Replacement text (literal)."},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
        "expected_sha256": {"type": "string", "description": "sha256 from read_file."},
    },
    "required": ["path", "old_text", "new_text"],
    "additionalProperties": False,
}
MAX_DIFF_CHARS = 32_000


@dataclass(frozen=True, slots=True)
class EditArgs:
    path: str
    old_text: str
    new_text: str
    replace_all: bool = False
    expected_sha256: str | None = None

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> EditArgs:
        return cls(
            args["path"],
            args["old_text"],
            args["new_text"],
            bool(args.get("replace_all", False)),
            args.get("expected_sha256"),
        )


_locks_guard = threading.Lock()
_locks: weakref.WeakValueDictionary[tuple[int, int, str], threading.Lock] = (
    weakref.WeakValueDictionary()
)


def file_lock(ctx: ToolContext, rel: RelPath) -> threading.Lock:
    """One lock per (parent directory identity, name): survives the inode swap of a
    rename, so concurrent edits of one file serialize and never lose each other."""
    with ctx.workspace.directory(rel.parent) as parent:
        dev, ino = identity(os.fstat(parent))
    key = (dev, ino, rel.name)
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = threading.Lock()
            _locks[key] = lock
        return lock


def nearest_lines(text: str, snippet: str) -> str:
    import difflib

    probe = next((line.strip() for line in snippet.split("\n") if line.strip()), "")
    lines = split_lines(text)[:20_000]
    candidates = {line.strip(): n for n, line in reversed(list(enumerate(lines, 1)))}
    close = difflib.get_close_matches(probe, list(candidates), n=3, cutoff=0.6)
    if not close:
        return "re-read the file with read_file and copy the text exactly"
    shown = "; ".join(f"line {candidates[c]}: {c[:120]!r}" for c in close)
    return f"nearest similar lines: {shown}. Re-read and copy the text exactly"


def replace(text: str, args: EditArgs, rel: RelPath) -> tuple[str, int]:
    old, new = args.old_text, args.new_text
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise Refused(
            RefusalCode.NOT_FOUND,
            f"old_text was not found in '{rel.text}'",
            nearest_lines(text, args.old_text),
        )
    if count > 1 and not args.replace_all:
        raise Refused(
            RefusalCode.CONFLICT,
            f"old_text occurs {count} times in '{rel.text}'",
            "include more surrounding lines so it is unique, or pass replace_all: true",
            {"count": count},
        )
    return text.replace(old, new) if args.replace_all else text.replace(old, new, 1), count


def unified(before: str, after: str, shown: str) -> str:
    import difflib

    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{shown}",
            tofile=f"b/{shown}",
            n=3,
        )
    )
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + "\n…[diff truncated]\n"
    return diff


def edit_file(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = EditArgs.from_dict(raw_args)
    rel = ctx.workspace.parse(args.path)
    if args.old_text == "":
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "old_text is empty",
            "to create a file use write_file; otherwise give the text to replace",
        )
    if args.old_text == args.new_text:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT, "old_text and new_text are identical", "nothing to change"
        )
    ctx.workspace.authorize(rel, Access.WRITE, ctx.authorize_path)
    with file_lock(ctx, rel):
        text, raw, st = load_text(ctx, rel, Access.WRITE)
        before_sha = sha256(raw)
        if args.expected_sha256 and args.expected_sha256.lower() != before_sha:
            raise Refused(
                RefusalCode.CONFLICT,
                f"'{rel.text}' changed since it was read (sha256 is now {before_sha})",
                "read_file again, then redo the edit",
            )
        after, count = replace(text, args, rel)
        data = encode(after)
        with ctx.workspace.directory(rel.parent) as parent:
            land(ctx.workspace, parent, rel, data, expected=identity(st), mode=st.st_mode)
    return ToolResult.success(
        NAME,
        {
            "path": rel.text,
            "replacements": count if args.replace_all else 1,
            "sha256": sha256(data),
            "previous_sha256": before_sha,
            "diff": unified(text, after, rel.text),
        },
    )


def format_text(data: dict[str, Any]) -> str:
    head = f"Edited {data['path']} ({data['replacements']} replacement(s), sha256 {data['sha256']})"
    return f"{head}\n{data['diff']}".rstrip()


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=False,
    replay_safe=False,
    run=offloaded(NAME, edit_file),
    run_sync=edit_file,
)
