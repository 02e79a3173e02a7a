"""Issue 25, item 6: every transition names its conversation.

A withdraw or an approval answer made in conversation A with the id of B's item
or call used to change B and write A's ledger; now it changes nothing anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.model.errors import NotPending
from runtime.model.llm import ToolCall
from runtime.model.records import InboxMode
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness, until_awaiting_approval

pytestmark = pytest.mark.usefixtures("store_kind")


async def test_transitions_scoped_withdraw_of_another_conversations_item_changes_nothing(
    tmp_path: Path,
) -> None:
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    try:
        a = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        b = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.submit(b.id, "a run in B, queued (nobody drives B)")
        item = await harness.submit(b.id, "then this", mode=InboxMode.FOLLOW_UP)
        assert item.state == "queued"
        before = [await harness.store.version(c) for c in (a.id, b.id)]
        assert await harness.withdraw(a.id, item.id) is False
        after = [await harness.store.version(c) for c in (a.id, b.id)]
        still = await harness.store.inbox_item(item.id)
        assert still is not None and still.state == "queued"
        assert after == before  # neither ledger was written
        assert await harness.withdraw(b.id, item.id) is True  # its own conversation may
    finally:
        await harness.close()


async def test_transitions_scoped_answer_to_another_conversations_call_changes_nothing(
    tmp_path: Path,
) -> None:
    write = ToolCall("c1", "write_file", '{"path": "x"}')
    provider = ScriptedProvider([ScriptedTurn(tool_calls=(write,)), ScriptedTurn(text="ok")])
    harness = await open_harness(tmp_path, provider, RecordingToolbox())
    try:
        a = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        b = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(b.id, approval_mode="ask")
        await harness.submit(b.id, "write it")
        snap = await until_awaiting_approval(harness, b.id)
        (call,) = snap.tool_calls
        before = [await harness.store.version(c) for c in (a.id, b.id)]
        for approve in (True, False):
            with pytest.raises(NotPending):
                await harness.respond(a.id, call.id, approve)
        after = [await harness.store.version(c) for c in (a.id, b.id)]
        view = await harness.snapshot(b.id)
        assert after == before
        assert [c.approval for c in view.tool_calls] == ["pending"]
        await harness.respond(b.id, call.id, True)  # its own conversation may
    finally:
        await harness.close()
