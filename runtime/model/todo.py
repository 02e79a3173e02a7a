"""A todo list's items as plain data and how the model reads them back (the stored list
is runtime.store.todos').

No imports from the rest of runtime: the store and the views use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

STATUSES = ("pending", "in_progress", "done")


class TodoItem(msgspec.Struct, frozen=True):
    content: str
    status: str  # one of STATUSES

    def to_dict(self) -> dict[str, str]:
        return {"content": self.content, "status": self.status}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TodoItem:
        return cls(str(data["content"]), str(data["status"]))


_MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}


def plan_text(items: Sequence[TodoItem]) -> str:
    """The list as the model reads it back: one `[ ] content` line per item."""
    if not items:
        return "(the todo list is empty)"
    return "\n".join(f"{_MARKS.get(i.status, '[ ]')} {i.content}" for i in items)


def with_plan(summary: str, items: Sequence[TodoItem]) -> str:
    """A compaction summary with the todo list as it stands appended, so the model keeps
    its plan when the turns that wrote it are summarised away (nothing if it has none)."""
    if not items:
        return summary
    return (
        f"{summary.rstrip()}\n\nYour todo list as it stands (the todo tool replaces it "
        f"whole):\n{plan_text(items)}"
    )
