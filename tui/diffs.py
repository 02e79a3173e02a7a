"""A call's diff, split into kinds of line, for every front end to colour the same way.

The diff itself is the runtime's (computed when a write or edit is recorded, kept
on the call as `review["diff"]`, bounded there with a note); this only reads it.
"""

from __future__ import annotations

from typing import Literal

from runtime.model.records import ToolCallRecord

Kind = Literal["file", "hunk", "add", "remove", "context", "note"]


def call_diff(call: ToolCallRecord) -> tuple[str, str]:
    """(diff, note) kept with a write or edit call; ("", "") for other calls."""
    review = call.review or {}
    return str(review.get("diff") or ""), str(review.get("note") or "")


def diff_lines(diff: str, note: str = "", limit: int | None = None) -> list[tuple[Kind, str]]:
    """Each line of `diff` with its kind; at most `limit` lines, the rest counted in a note."""
    out: list[tuple[Kind, str]] = []
    lines = diff.splitlines()
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        if line.startswith(("--- ", "+++ ")):
            out.append(("file", line))
        elif line.startswith("@@"):
            out.append(("hunk", line))
        elif line.startswith("+"):
            out.append(("add", line))
        elif line.startswith("-"):
            out.append(("remove", line))
        else:
            out.append(("context", line))
    if len(shown) < len(lines):
        out.append(("note", f"… {len(lines) - len(shown)} more lines"))
    if note:
        out.append(("note", note))
    return out


def rules_text(rules: object) -> str:
    """`commands starting with `git status`, edits under src/`: what `a` saves."""
    described = [r.describe() for r in rules]  # type: ignore[attr-defined]
    return ", ".join(described)
