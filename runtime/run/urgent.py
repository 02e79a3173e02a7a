"""Interrupt-next (seed 000): an urgent input stops the run going at its next safe point
and runs before ordinary queued work, keeping its identity.

An urgent input is an inbox item of mode `interrupt_next`, admitted like any other
(runtime.run.admission: one transaction; idle, it simply starts a run). While a run
goes it waits queued, and:

- the run stops at its next safe point: a stream is cut (it has no effect; what was
  shown is kept and marked cut off); tool calls already started run to their end and
  the run stops before its next model request (`check_interrupt`), never mid-effect;
- steers wait too (they are not placed into a run that is about to stop; each later
  starts a run of its own, in order);
- the driver takes queued urgent items before ordinary ones, FIFO among each
  (`urgent_first`), so the same item id goes queued → placed in the ledger;
- urgent items do not cut a run that an urgent item started: they are FIFO.

All of it is read from the store, so a crash changes nothing: a resumed run finds the
urgent item queued and stops at its first safe point, and the item then runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from runtime.model.records import SUPERSEDED, InboxItem, InboxMode, Run

if TYPE_CHECKING:
    from runtime.store.dialect import Db


__all__ = ["BY_USER", "URGENT_REASON", "ending_reason", "urgent_first", "urgent_waiting"]

#: The reason a run stopped for an urgent input ends with.
URGENT_REASON = "stopped for an urgent input, which runs next"
BY_USER = "interrupted by the user"


def ending_reason(stored: Run | None, stop_reason: str | None) -> str:
    """Why an interrupted run ended, as the store says, the user's word first: superseded
    (runtime.run.redirect), interrupted by the user, else the loop's own `stop_reason`
    (an urgent input)."""
    if stored is not None and stored.reason == SUPERSEDED:
        return SUPERSEDED
    if stop_reason and not (stored is not None and stored.interrupt_requested):
        return stop_reason
    return BY_USER


def urgent_waiting(db: Db, conversation_id: str, run_inbox_id: str) -> bool:
    """Whether an urgent item waits queued for a run started by `run_inbox_id` to give
    way (never when that run's own input was urgent: urgent items are FIFO)."""
    row = db.execute(
        "SELECT 1 FROM inbox WHERE conversation_id = ? AND state = 'queued' AND mode = ? "
        "AND NOT EXISTS (SELECT 1 FROM inbox WHERE id = ? AND mode = ?) LIMIT 1",
        (conversation_id, InboxMode.INTERRUPT_NEXT, run_inbox_id, InboxMode.INTERRUPT_NEXT),
    ).fetchone()
    return row is not None


def urgent_first(items: Iterable[InboxItem]) -> list[InboxItem]:
    """Queued items in the order runs take them: urgent ones first, each class oldest
    first (a stable sort of an oldest-first list)."""
    return sorted(items, key=lambda item: item.mode != InboxMode.INTERRUPT_NEXT)
