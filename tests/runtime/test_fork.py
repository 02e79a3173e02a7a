"""Fork and rewind: a new conversation sharing history up to an entry; the source untouched."""

from __future__ import annotations

import json

import pytest

from runtime import reduce, view_from_snapshot
from runtime.model.errors import UnknownConversation, UnknownEntry
from runtime.model.ids import parse_uuid
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness

pytestmark = pytest.mark.usefixtures("store_kind")


async def two_turns(tmp_path):
    """A conversation: hi → (tool call, result, answer); then again → answer."""
    turns = [
        ScriptedTurn(tool_calls=(ToolCall("c1", "read_file", json.dumps({"path": "a"})),)),
        ScriptedTurn(text="read it"),
        ScriptedTurn(text="second answer"),
    ]
    harness = await open_harness(tmp_path, ScriptedProvider(turns), RecordingToolbox())
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    for text in ("hi", "again"):
        item = await harness.submit(conv.id, text)
        assert (await harness.wait(item.id, conv.id)).state == "completed"
    await harness.release(conv.id)
    return harness, conv


def shape(view):
    return [(e.kind, e.status, e.text) for e in view.entries]


async def test_fork_at_an_entry_shares_history_up_to_it_and_leaves_the_source(tmp_path):
    harness, conv = await two_turns(tmp_path)
    before = await harness.store.snapshot(conv.id)
    ledger_before = await harness.ledger(conv.id)
    answer = next(e for e in before.entries if e.text == "read it")

    forked = await harness.fork(conv.id, answer.id)

    assert forked.id != conv.id and parse_uuid(forked.id) == forked.id
    assert forked.id[14] == "7"  # a fresh uuid7
    assert forked.parent_id == conv.id and forked.fork_seq == answer.position
    view = await harness.snapshot(forked.id)
    assert shape(view) == [
        ("user", "complete", "hi"),
        ("assistant", "complete", ""),
        ("tool_result", "complete", "read_file ok"),
        ("assistant", "complete", "read it"),
    ]
    # Fresh ids everywhere, and the tool call still pairs with its result.
    assert not {e.id for e in view.entries} & {e.id for e in before.entries}
    snap = await harness.store.snapshot(forked.id)
    (call,) = snap.tool_calls
    assert call.conversation_id == forked.id and call.state == "done"
    result = next(e for e in snap.entries if e.kind == "tool_result")
    assert result.data["tool_call_id"] == call.id and call.result_entry_id == result.id
    assert snap.entries[1].data["tool_calls"][0]["key"] == call.id
    assert [r.state for r in snap.runs] == ["completed"]
    # The fork's ledger replays into the same view as its snapshot.
    replayed = None
    for event in await harness.ledger(forked.id):
        replayed = view_from_snapshot_or_reduce(replayed, event)
    assert shape(replayed) == shape(view)
    # The source is untouched.
    assert await harness.store.snapshot(conv.id) == before
    assert await harness.ledger(conv.id) == ledger_before
    await harness.close()


def view_from_snapshot_or_reduce(view, event):
    if view is None:
        from runtime.store.database import Snapshot

        conv = event.conversation
        return view_from_snapshot(Snapshot(conv, (), (), (), ()))
    return reduce(view, event)


async def test_fork_inside_a_run_ends_that_run_interrupted(tmp_path):
    harness, conv = await two_turns(tmp_path)
    snap = await harness.store.snapshot(conv.id)
    calling = snap.entries[1]  # the assistant entry that called the tool
    forked = await harness.fork(conv.id, calling.id)
    copied = await harness.store.snapshot(forked.id)
    assert [e.kind for e in copied.entries] == ["user", "assistant"]
    assert [r.state for r in copied.runs] == ["interrupted"]
    assert [(c.state, c.result) for c in copied.tool_calls] == [("interrupted", None)]
    await harness.close()


async def test_fork_without_an_entry_copies_everything(tmp_path):
    harness, conv = await two_turns(tmp_path)
    forked = await harness.fork(conv.id)
    assert shape(await harness.snapshot(forked.id)) == shape(await harness.snapshot(conv.id))
    await harness.close()


async def test_fork_of_an_unknown_entry_or_conversation_writes_nothing(tmp_path):
    harness, conv = await two_turns(tmp_path)
    count = len(await harness.list_conversations())
    with pytest.raises(UnknownEntry):
        await harness.fork(conv.id, "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e")
    with pytest.raises(UnknownConversation):
        await harness.fork("0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e")
    assert len(await harness.list_conversations()) == count
    await harness.close()


async def test_rewind_forks_before_the_message_and_gives_it_back(tmp_path):
    harness, conv = await two_turns(tmp_path)
    snap = await harness.store.snapshot(conv.id)
    again = next(e for e in snap.entries if e.text == "again")
    rewound = await harness.rewind(conv.id, again.id)
    assert rewound.prompt == "again"
    assert [e.text for e in (await harness.snapshot(rewound.conversation.id)).entries] == [
        "hi",
        "",
        "read_file ok",
        "read it",
    ]
    first = snap.entries[0]
    empty = await harness.rewind(conv.id, first.id)
    assert empty.prompt == "hi" and (await harness.snapshot(empty.conversation.id)).entries == ()
    with pytest.raises(UnknownEntry):
        await harness.rewind(conv.id, snap.entries[-1].id)  # an answer, not a message
    await harness.close()
