"""The harness over a socket pair (runtime.ipc.remote): calls and their typed errors, the
event channel, and either end going away."""

from __future__ import annotations

import asyncio
import socket

import pytest

from runtime import reduce
from runtime.ipc.channel import RESYNC
from runtime.ipc.frames import HarnessGone, sendable_error
from runtime.ipc.remote import RemoteHarness, serve
from runtime.model.errors import BastionError, UnknownConversation
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

ANSWER = "The quick brown fox jumps. " * 40


async def served(tmp_path, turns):
    """A harness served on one end of a socket pair, a RemoteHarness on the other."""
    harness = await open_harness(tmp_path, ScriptedProvider(turns))
    theirs, ours = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=theirs)
    server = asyncio.ensure_future(serve(harness, reader, writer))
    remote = await RemoteHarness.connect(ours)
    return harness, remote, server, writer


async def follow(remote, conv_id, channel):
    """The view, folded from the channel until the conversation's first run ended."""
    view = await remote.snapshot(conv_id)
    while not (view.runs and view.runs[-1].terminal):
        batch = await channel.get()
        assert batch is not None, "the channel closed before the run ended"
        if batch is RESYNC:
            view = await remote.snapshot(conv_id)
            continue
        for event in batch:
            view = reduce(view, event)
        if view.resync_required:
            view = await remote.snapshot(conv_id)
    return view


async def test_calls_and_events_cross_the_pair(tmp_path):
    harness, remote, server, _ = await served(
        tmp_path, [ScriptedTurn(text=ANSWER, chunk_size=3, delay=0.001)]
    )
    try:
        conv = await remote.call("create_conversation", str(tmp_path), settings={"model": "s/m"})
        await remote.drive(conv.id)
        channel = remote.subscribe(conv.id)
        await remote.submit(conv.id, "go")
        view = await follow(remote, conv.id, channel)
        assert view.runs[-1].state == "completed"
        assert str(view.text_of(view.entries[-1])) == ANSWER
        stored = await harness.snapshot(conv.id)
        assert stored.entries[-1].text == ANSWER
        assert await remote.snapshot(conv.id) == stored  # a view comes back whole
    finally:
        await remote.close()
    await asyncio.wait_for(server, 5)
    assert harness._closed  # closed there by the parent's close()


async def test_an_error_arrives_as_its_own_type_with_its_hint(tmp_path):
    harness, remote, _server, _ = await served(tmp_path, [])
    try:
        with pytest.raises(UnknownConversation) as raised:
            await remote.snapshot("0192f7a4-6c1e-7d2a-9b3e-000000000000")
        assert raised.value.hint
    finally:
        await remote.close()
        await harness.close()


def test_an_error_that_does_not_pickle_is_sent_as_a_bastion_error_saying_the_same():
    class Odd(BastionError):
        def __init__(self, what: str, why: str) -> None:
            super().__init__(f"{what}: {why}", hint="try again")

    sent = sendable_error(Odd("store", "locked"))
    assert type(sent) is BastionError
    assert (sent.message, sent.hint) == ("store: locked", "try again")
    plain = sendable_error(UnknownConversation("no such", hint="list them"))
    assert isinstance(plain, UnknownConversation)


async def test_the_harness_side_ending_fails_what_waits_and_closes_channels(tmp_path):
    harness, remote, server, writer = await served(tmp_path, [])
    try:
        conv = await remote.call("create_conversation", str(tmp_path), settings={"model": "s/m"})
        channel = remote.subscribe(conv.id)
        server.cancel()  # the child dies: its end closes
        writer.transport.abort()
        assert await asyncio.wait_for(channel.get(), 5) is None
        with pytest.raises(HarnessGone):
            await remote.snapshot(conv.id)
        assert isinstance(remote.gone, HarnessGone)
        assert remote.subscribe(conv.id)._closed  # a late subscription is closed at once
    finally:
        await remote.close()
        await harness.close()


async def test_the_front_end_ending_ends_serve(tmp_path):
    harness, remote, server, _ = await served(tmp_path, [])
    try:
        remote._writer.transport.abort()  # end of file, as when the app is killed
        # serve returns False ("the parent is gone"), not True ("asked to close").
        assert await asyncio.wait_for(server, 30) is False
    finally:
        await harness.close()


def test_records_and_views_come_back_equal_from_a_pickle(tmp_path):
    import pickle

    from runtime.model.records import (
        AgentSettings,
        Conversation,
        Entry,
        InboxItem,
        Run,
        ToolCallRecord,
    )

    conv = Conversation("c", "title", str(tmp_path), {"model": "s/m"}, 1.0, 2.0)
    records = [
        conv,
        AgentSettings(),
        Entry("e", "c", 1, "assistant", "complete", "text", 3.0, "r", {"k": [1]}),
        Run("r", "c", "i", "completed", 1.0, 2.0),
        InboxItem("i", "c", "prompt", "hi", "queued", 1.0),
        ToolCallRecord(
            "t", "c", "r", "e", 0, "read_file", '{"path": "a"}', True, "auto", "done", 1.0, 2.0
        ),
    ]
    for record in records:
        back = pickle.loads(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == record and type(back) is type(record)


async def test_the_view_sent_with_the_session_and_its_first_channel_miss_nothing(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text=ANSWER, chunk_size=3, delay=0.001)])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    # The child: subscribe, then take the view it sends with the session...
    first = harness.subscribe(conv.id)
    view = await harness.snapshot(conv.id)
    await harness.submit(conv.id, "go")  # ...and the run goes on before the app connects.
    theirs, ours = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=theirs)
    server = asyncio.ensure_future(serve(harness, reader, writer, first=first))
    remote = await RemoteHarness.connect(ours, opening=(conv.id, "settings", view))
    try:
        assert remote.take_opening("another") is None  # only for its own conversation
        remote._opening = (conv.id, "settings", view)
        settings, got = remote.take_opening(conv.id)
        assert settings == "settings" and got == view
        assert remote.take_opening(conv.id) is None  # once
        channel = remote.subscribe(conv.id)
        while not (got.runs and got.runs[-1].terminal):
            batch = await asyncio.wait_for(channel.get(), 10)
            assert isinstance(batch, list), "nothing was missed: no resync"
            for event in batch:
                got = reduce(got, event)
            assert not got.resync_required
        assert str(got.text_of(got.entries[-1])) == ANSWER
        assert remote.subscribe(conv.id) is not channel  # a second one is a new subscription
    finally:
        await remote.close()
    await asyncio.wait_for(server, 5)
