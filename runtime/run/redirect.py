"""Interrupt and redirect in one action: cut the run at the step it is in, and make what
the user typed the next prompt.

Esc then Enter does this in two steps, with a window between them in which the
prompt is not yet sent and the run is already gone. `redirect_tx` does both in one
transaction: the interrupt exactly as Esc commits it (runtime.run.calls.interrupt_tx:
the run marked, its calls that have not started settled, the queued inputs
withdrawn and handed back), then `text` admitted as a new queued prompt. The
driver cancels what is running (a command's process group is killed and its
output so far kept in an `INTERRUPTED` result; a streaming answer is kept and
marked interrupted), ends the run as interrupted, and starts the next run with
`text`: the model sees the cut-off step, marked as such, then the new message.

The text is queued as a prompt, not a steer, so the run being cut can never take
it in (runtime.run.loop places only steers into a running run). If no run is active,
it is simply sent.

`supersede_tx` is the same cut with one difference (seed 000's `supersede`): the
run's unfinished work, its answer so far, its tool calls and their results, is
discarded from the model's context and kept in the record. In the same transaction
as the interrupt, the run's reason becomes `superseded` and a note entry naming the
run is added (`SUPERSEDES` in its data): the request builder leaves out every entry
of a run a note names (runtime.context.messages), the transcript and export show
them marked. The user's own words (the prompt, steers) stay. Committed before
anything is cancelled, so a crash between the decision and the next request changes
nothing: the resumed run ends as superseded and the next request goes without it.
"""

from __future__ import annotations

from typing import Any

from runtime.model.errors import NotRunning
from runtime.model.ids import now, uuid7
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    SUPERSEDED,
    SUPERSEDES,
    Entry,
    EntryKind,
    EntryStatus,
    InboxItem,
    InboxMode,
    Run,
)
from runtime.model.results import Supersession
from runtime.run.admission import admit_tx, admitted_item
from runtime.run.calls import interrupt_tx
from runtime.store.dialect import dialect_of
from runtime.store.rows import ENTRY_COLUMNS, entry_row
from runtime.store.tx import Tx

NOTE = "superseded: the answer above and its work are left out of the model's context"


def redirect_tx(
    tx: Tx, text: str, request_key: str | None = None
) -> tuple[Run | None, list[InboxItem], InboxItem]:
    """In one transaction: the interrupt, then `text` as the next prompt. A request key
    already admitted (a retry whose first reply was lost) changes nothing: its item is
    returned and the run its prompt started is left alone."""
    if request_key is not None:
        found = admitted_item(tx, text, request_key, InboxMode.PROMPT)
        if found is not None:
            return None, [], found
    run, withdrawn = interrupt_tx(tx)
    item = admit_tx(tx, text, request_key, InboxMode.PROMPT)
    return run, withdrawn, item


def supersede_tx(tx: Tx, text: str | None, request_key: str | None = None) -> Supersession:
    """In one transaction: the interrupt, the run marked superseded, the note that
    discards its work from the model's context, then `text` (if any) as the next prompt.
    NotRunning (nothing written) when no run is going; a request key already admitted
    returns what it did then (nothing more is cut)."""
    if text is not None and request_key is not None:
        found = admitted_item(tx, text, request_key, InboxMode.PROMPT)
        if found is not None:
            by_item = dialect_of(tx.db).json_text("data", "item")
            rows = tx.rows(
                f"SELECT {ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? "
                f"AND kind = 'note' AND {by_item} = ?",
                (tx.conversation_id, found.id),
            )
            if rows:
                note = entry_row(rows[0])
                return Supersession(str(note.data[SUPERSEDES]), note, (), found)
    if tx.active_run() is None:
        raise NotRunning(
            "nothing to supersede: no run is going",
            hint="supersede ends a run and drops its unfinished answer; /rewind goes back "
            "before an earlier message, /reset starts a new context",
        )
    run, withdrawn = interrupt_tx(tx)
    assert run is not None
    marked = tx.transition_run(run.id, ACTIVE_RUN_STATES, reason=SUPERSEDED) or run
    item = admit_tx(tx, text, request_key, InboxMode.PROMPT) if text is not None else None
    data: dict[str, Any] = {SUPERSEDES: marked.id}
    if item is not None:
        data["item"] = item.id
    note = Entry(
        uuid7(), tx.conversation_id, 0, EntryKind.NOTE, EntryStatus.COMPLETE, NOTE, now(),
        run_id=marked.id, data=data,
    )  # fmt: skip
    return Supersession(marked.id, tx.add_entry(note), tuple(withdrawn), item)
