"""What a resumed run finds it had already done before the process that drove it died."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.model.records import Entry, EntryKind, EntryStatus

__all__ = ["answered_already"]


def answered_already(entries: Sequence[Entry], run_id: str) -> Entry | None:
    """The run's final answer if the model had given it (a complete assistant entry
    with no tool calls, nothing of the run after it but lines for the user) and the process died before the
    run was committed as answered: while its Stop hooks ran, or just before. The run
    then ends with that answer; asking the model again would pay for a second one.
    None when the run has work left."""
    for entry in reversed(entries):
        if entry.run_id != run_id:
            continue
        if entry.kind == EntryKind.NOTE and not entry.data.get("for_model"):
            continue  # a line for the user (a hook that was cut off): not the model's turn
        done = entry.kind == EntryKind.ASSISTANT and entry.status == EntryStatus.COMPLETE
        return entry if done and not entry.data.get("tool_calls") else None
    return None
