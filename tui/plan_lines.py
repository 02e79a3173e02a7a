"""The todo list (runtime.plan) as lines for people: one mark per status.

Shared by the app's pinned list (tui.widgets.todo), plain mode and print mode's
text output; imports neither textual nor rich.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime import TodoItem

MARKS = {"done": "✓", "in_progress": "▸", "pending": "○"}
MAX_SHOWN = 10  # items listed; the rest are counted


def plan_header(items: Sequence[TodoItem]) -> str:
    done = sum(i.status == "done" for i in items)
    return f"plan · {done}/{len(items)} done"


def plan_rows(items: Sequence[TodoItem], limit: int = MAX_SHOWN) -> list[tuple[str, str, str]]:
    """(status, mark, content) per item shown. A long list shows the window that starts
    a little before the first item not done, and one row counting the rest."""
    start = 0
    if len(items) > limit:
        first_open = next((i for i, t in enumerate(items) if t.status != "done"), 0)
        start = max(0, min(first_open - 1, len(items) - limit))
    rows = [(t.status, MARKS.get(t.status, "○"), t.content) for t in items[start : start + limit]]
    hidden = len(items) - len(rows)
    if hidden:
        rows.append(("more", "…", f"{hidden} more"))
    return rows


def plan_block(items: Sequence[TodoItem]) -> str:
    """The list as plain text: the header, then one `mark content` line per item."""
    lines = [plan_header(items)]
    lines.extend(f"  {mark} {content}" for _status, mark, content in plan_rows(items))
    return "\n".join(lines)
