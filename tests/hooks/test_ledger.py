"""A hook's run is a ledger row read back whole (what `bastion attach` follows), and
the views take it in order; its line is a note entry every front end draws."""

from __future__ import annotations

import msgspec
import pytest

from runtime.model.events import EntryAdded, HookRan
from runtime.model.views import reduce, view_from_snapshot
from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session

pytestmark = pytest.mark.usefixtures("store_kind")


async def test_hook_runs_read_back_from_the_ledger_and_fold_into_a_view(tmp_path):
    hooks = {"PreToolUse": [{"command": "echo 'not on Fridays' >&2; exit 2"}]}
    turns = [{"tool_calls": [command("true")]}, {"text": "ok"}]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        subscription = s.harness.subscribe(s.conversation_id)
        try:
            await s.prompt("go")
            published = subscription.pending()
            events = await s.harness.store.ledger(s.conversation_id)
            start = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    ran = [e for e in events if isinstance(e, HookRan)]
    assert [(e.hook_event, e.state, e.outcome) for e in ran] == [("PreToolUse", "done", "block")]
    assert ran[0] in published  # read back equal to what was published
    note = next(e.entry for e in events if isinstance(e, EntryAdded) and e.entry.kind == "note")
    assert note.text.startswith("PreToolUse hook `") and "not on Fridays" in note.text
    assert note.data["hook"]["outcome"] == "block"
    view = view_from_snapshot(start)
    later = msgspec.structs.replace(ran[0], version=view.version + 1)
    assert (
        reduce(view, later).version == view.version + 1 and not reduce(view, later).resync_required
    )
