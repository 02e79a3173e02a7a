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
"""

from __future__ import annotations

from runtime.model.records import InboxItem, InboxMode, Run
from runtime.run.admission import admit_tx, admitted_item
from runtime.run.calls import interrupt_tx
from runtime.store.tx import Tx


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
