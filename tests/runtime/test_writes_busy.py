"""Issue 37 item 8 (seed 004): writes and reject-when-busy. A write appends a user
entry without asking the model (the model reads it with the next input); input sent
with `when_busy="reject"` while a run goes raises the typed `Busy` and admits nothing,
decided in the transaction that would admit it."""

from __future__ import annotations

import asyncio

import pytest

from runtime import Busy
from runtime.ipc.local import local_client
from runtime.model.records import InboxMode
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import HangingProvider


async def driven(tmp_path, provider):
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    return harness, conv.id


async def test_a_write_is_read_with_the_next_input_and_asks_nothing(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="Noted.")])
    harness, conv_id = await driven(tmp_path, provider)
    try:
        client = await local_client(harness, owner=False)
        written = await client.write(conv_id, "FYI: the tests live in spec/.")
        assert written.kind == "user" and written.run_id is None
        assert provider.requests == []  # the model was not asked
        snap = await harness.snapshot(conv_id)
        assert snap.runs == () and snap.entries[-1].text == "FYI: the tests live in spec/."
        item = await client.submit(conv_id, "run them")
        await client.wait(item.id, conv_id)
        sent = [m.content for m in provider.requests[0].messages if m.role == "user"]
        assert sent == ["FYI: the tests live in spec/.", "run them"]
        await client.close()
    finally:
        await harness.close()


async def test_while_a_run_goes_a_write_and_a_rejecting_submit_are_busy(tmp_path):
    provider = HangingProvider("working on it")
    harness, conv_id = await driven(tmp_path, provider)
    try:
        client = await local_client(harness, owner=False)
        await client.submit(conv_id, "start")
        await asyncio.wait_for(provider.streamed.wait(), 10)
        before = await harness.snapshot(conv_id)
        with pytest.raises(Busy, match="nothing was written"):
            await client.write(conv_id, "a note")
        with pytest.raises(Busy, match="not admitted"):
            await client.submit(conv_id, "later", mode=InboxMode.FOLLOW_UP,
                                request_key="k1", when_busy="reject")  # fmt: skip
        after = await harness.snapshot(conv_id)
        assert after.version == before.version and after.inbox == before.inbox
        queued = await client.submit(conv_id, "later", mode=InboxMode.FOLLOW_UP, request_key="k1")
        assert queued.state == "queued"  # the key was not spent by the refusal
        await client.interrupt(conv_id)
        await client.close()
    finally:
        await harness.close()


async def test_an_unknown_when_busy_is_one_clear_error(tmp_path):
    harness, conv_id = await driven(tmp_path, ScriptedProvider([]))
    try:
        with pytest.raises(Exception, match="when_busy is 'queue' or 'reject'"):
            await harness.submit(conv_id, "x", when_busy="later")
    finally:
        await harness.close()
