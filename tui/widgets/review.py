"""A write's or edit's diff, coloured from the theme: in the approval prompt and in the
tool row once the call has been answered. The diff is the one kept with the call."""

from __future__ import annotations

from runtime.model.records import Approval, ToolCallRecord, ToolCallState
from tui.diffs import call_diff, diff_lines
from tui.markup import escape

__all__ = ["ROW_DIFF_LINES", "diff_markup", "row_diff_markup"]

ROW_DIFF_LINES = 12  # lines of a diff shown under its call in the transcript

_TONES = {
    "file": "b $foreground-muted",
    "hunk": "$accent",
    "add": "$success",
    "remove": "$error",
    "context": "$foreground-muted",
    "note": "i $foreground-muted",
}


def diff_markup(diff: str, note: str = "", limit: int | None = None, indent: str = "") -> str:
    """Content markup of a unified diff, one line per diff line, coloured by kind."""
    return "\n".join(
        f"{indent}[{_TONES[kind]}]{escape(line) or ' '}[/]"
        for kind, line in diff_lines(diff, note, limit)
    )


def row_diff_markup(record: ToolCallRecord | None) -> str:
    """Under a write or edit in the transcript, once it is no longer asking: its diff
    (bounded) and, when rules let it run without asking, which."""
    if record is None or (
        record.approval == Approval.PENDING and record.state == ToolCallState.PENDING
    ):
        return ""
    lines: list[str] = []
    allowed = (record.review or {}).get("allowed_by") or ()
    if allowed and record.approval == Approval.APPROVED:
        from runtime import Rule

        names = ", ".join(Rule.from_dict(r).describe() for r in allowed)
        lines.append(f"    [i $foreground-muted]allowed by {escape(names)}[/]")
    diff, note = call_diff(record)
    if diff and record.state != ToolCallState.DENIED:
        lines.append(diff_markup(diff, note, ROW_DIFF_LINES, indent="    "))
    return "\n".join(lines)
