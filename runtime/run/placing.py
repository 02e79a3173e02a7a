"""An inbox item becomes the user entry of a run (the conversation's input, placed)."""

from __future__ import annotations

from typing import Any

from runtime.model.ids import now, uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus, InboxItem, InboxState
from runtime.store.tx import Tx

__all__ = ["place_item", "user_entry"]


def user_entry(item: InboxItem, run_id: str) -> Entry:
    """The user entry an inbox item becomes when it is placed into run `run_id` (one a
    background agent sent its parent says so: runtime.agents.background)."""
    data: dict[str, Any] = {"inbox_id": item.id}
    if (item.request_key or "").startswith("agent-ended:"):
        data["from_agent"] = True
    return Entry(
        uuid7(), item.conversation_id, 0, EntryKind.USER, EntryStatus.COMPLETE, item.text,
        now(), run_id=run_id, data=data,
    )  # fmt: skip


def place_item(tx: Tx, item: InboxItem, run_id: str) -> Entry | None:
    """Place a queued inbox item into run `run_id`: its user entry, and the item marked
    placed (compare-and-set: None, and nothing written, if it is no longer queued)."""
    entry = user_entry(item, run_id)
    placed = tx.transition_inbox(item.id, InboxState.PLACED, run_id=run_id, entry_id=entry.id)
    if placed is None:
        return None
    return tx.add_entry(entry)
