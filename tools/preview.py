"""What a write or edit would change, before it runs: a bounded unified diff.

Shown in the approval prompt and kept with the call. Read-only: the file is
read through the same path rules as the tools (no symlink, no `..`), and any
refusal the call itself would meet becomes the preview's note.
"""

from __future__ import annotations

import difflib
from typing import Any

from tools.context import Access, ToolContext
from tools.edit import EditArgs, replace
from tools.read import load_text
from tools.refusal import Refused

MAX_PREVIEW_LINES = 400
MAX_PREVIEW_CHARS = 40_000


def preview(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """{"diff": str, "note": str} for write_file/edit_file; None for other tools."""
    if name not in ("write_file", "edit_file"):
        return None
    try:
        rel = ctx.workspace.parse(args.get("path"))
        before = _current(ctx, rel)
        if name == "write_file":
            after = args.get("content")
            if not isinstance(after, str):
                return {"diff": "", "note": "content is not a string"}
            if before is not None and not args.get("overwrite"):
                note = f"{rel.text} exists and overwrite is not set: the write will be refused"
                return {"diff": "", "note": note}
        else:
            if before is None:
                return {"diff": "", "note": f"{rel.text} does not exist"}
            after, _ = replace(before, EditArgs.from_dict(args), rel)
    except Refused as exc:
        return {"diff": "", "note": f"{exc.refusal.code.value}: {exc.refusal.message}"}
    except (KeyError, TypeError):
        return {"diff": "", "note": "the arguments are incomplete"}
    return bounded(unified(before or "", after, rel.text, created=before is None))


def _current(ctx: ToolContext, rel: Any) -> str | None:
    try:
        text, _, _ = load_text(ctx, rel, Access.READ)
    except Refused as exc:
        if exc.refusal.code.value == "NOT_FOUND":
            return None
        raise
    return text


def unified(before: str, after: str, shown: str, *, created: bool) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile="/dev/null" if created else f"a/{shown}",
            tofile=f"b/{shown}",
            n=3,
        )
    )


def bounded(diff: str) -> dict[str, Any]:
    lines = diff.splitlines(keepends=True)
    note = ""
    if len(lines) > MAX_PREVIEW_LINES or len(diff) > MAX_PREVIEW_CHARS:
        kept = lines[:MAX_PREVIEW_LINES]
        while kept and sum(map(len, kept)) > MAX_PREVIEW_CHARS:
            kept.pop()
        note = f"diff cut: {len(lines) - len(kept)} of {len(lines)} lines not shown"
        diff = "".join(kept)
    if not diff.strip() and not note:
        note = "no change"
    return {"diff": diff, "note": note}
