"""The harness on its own thread: the proxy's calls run on the harness loop, and the
event channel joins deltas, stays bounded, and says RESYNC when it had to drop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from runtime import reduce
from runtime.ipc.channel import RESYNC, EventChannel
from runtime.ipc.local import local_client
from runtime.model.events import TextDelta
from runtime.model.views import TextDeltas
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")


def delta(seq: int, offset: int, text: str, run: str = "r") -> TextDelta:
    return TextDelta("c", run, 1, seq, "e", offset, text)


async def test_consecutive_deltas_arrive_joined():
    channel = EventChannel()
    channel.put_many([delta(1, 0, "ab"), delta(2, 2, "cd")])
    channel.put_many([delta(3, 4, "ef"), delta(5, 6, "gh"), delta(1, 0, "x", run="s")])
    batch = await channel.get()
    assert batch == [
        TextDeltas("c", "r", 1, 1, 3, "e", 0, "abcdef"),
        delta(5, 6, "gh"),  # a gap in seq is not joined: the reducer must see it
        delta(1, 0, "x", run="s"),
    ]


async def test_overflow_drops_the_queue_and_says_resync():
    channel = EventChannel(limit=3)
    channel.put_many([delta(1, 0, "a", run=f"r{i}") for i in range(5)])
    channel.put_many([delta(2, 1, "b", run="r4")])
    assert await channel.get() is RESYNC
    assert await channel.get() == [delta(2, 1, "b", run="r4")]
    assert channel.overflows == 1


async def test_a_producer_thread_wakes_the_consumer_and_close_ends_it():
    channel = EventChannel()

    def produce() -> None:
        for i in range(1, 2001):
            channel.put_many([delta(i, i - 1, "x")])
        channel.close()

    waiter = asyncio.ensure_future(channel.get())
    await asyncio.sleep(0)  # (yield to the loop: the consumer waits before the thread puts)
    thread = threading.Thread(target=produce)
    thread.start()
    text, last = "", 0
    batch = await waiter
    while batch is not None:
        for event in batch:
            assert event.seq == last + 1
            last = event.last_seq if isinstance(event, TextDeltas) else event.seq
            text += event.text
        batch = await channel.get()
    thread.join()
    assert text == "x" * 2000 and last == 2000


async def test_a_client_streams_a_run_into_the_view(tmp_path):
    provider = ScriptedProvider(
        [ScriptedTurn(text="The quick brown fox jumps. " * 40, chunk_size=3, delay=0.001)]
    )
    inner = await open_harness(tmp_path, provider)
    conv = await inner.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await inner.drive(conv.id)
    harness = await local_client(inner)
    try:
        channel = harness.subscribe(conv.id)
        view = await harness.snapshot(conv.id)
        item = await harness.submit(conv.id, "go")
        while view.active_run is None or not view.runs[-1].terminal:
            batch = await channel.get()
            if batch is RESYNC:
                view = await harness.snapshot(conv.id)
                continue
            assert batch is not None
            for event in batch:
                view = reduce(view, event)
            if view.resync_required:
                view = await harness.snapshot(conv.id)
            if view.runs and view.runs[-1].terminal:
                break
        run = await harness.wait(item.id, conv.id)
        end = await harness.snapshot(conv.id)
        assert run.state == "completed"
        assert view.entries[-1].text == end.entries[-1].text == "The quick brown fox jumps. " * 40
    finally:
        await harness.close()
    assert inner._closed  # the owner client closed it


async def test_rest_keeps_its_pace_for_text_but_ends_at_once_for_a_run_change():
    from runtime.model.events import RunUpdated
    from runtime.model.records import Run

    channel = EventChannel()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await channel.rest(0.05)  # nothing queued: the whole pause
    assert loop.time() - start >= 0.045

    def produce(events: list) -> None:
        threading.Timer(0.05, channel.put_many, (events,)).start()

    produce([delta(1, 0, "more text")])
    start = loop.time()
    await channel.rest(0.3)  # text does not cut the pause short
    assert loop.time() - start >= 0.29
    assert await channel.get() == [delta(1, 0, "more text")]  # one delta stays as it is

    run = Run("r", "c", "i", "completed", 0.0, 0.0)
    produce([RunUpdated("c", 2, run)])
    start = loop.time()
    await channel.rest(5.0)  # the run ended: shown now, not in 5 s
    assert loop.time() - start < 2.0
    await channel.rest(5.0)  # still queued: no wait at all
    assert loop.time() - start < 2.0
    assert await channel.get() == [RunUpdated("c", 2, run)]


async def test_poll_takes_what_is_queued_without_waiting():
    channel = EventChannel(limit=2)
    assert channel.poll() == []  # nothing queued: an empty batch, at once
    channel.put_many([delta(1, 0, "ab"), delta(2, 2, "cd")])
    assert channel.poll() == [TextDeltas("c", "r", 1, 1, 2, "e", 0, "abcd")]
    channel.put_many([delta(1, 0, "a", run=f"r{i}") for i in range(3)])
    assert channel.poll() is RESYNC  # an overflow, as get() says it
    channel.close()
    assert channel.poll() is None  # closed and drained


# --- issue 25, item 10: reasoning deltas, joined and reduced in linear time --------


def reasoning(seq: int, text: str, run: str = "r") -> Any:
    from runtime.model.events import ReasoningDelta

    return ReasoningDelta("c", run, 1, seq, "e", text)


def empty_view() -> Any:
    from runtime.model.records import Conversation
    from runtime.model.views import ConversationView

    return ConversationView(Conversation("c", "", "/", {}, 0.0, 0.0), 0)


async def test_reasoning_deltas_a_burst_is_joined_not_overflowed():
    from runtime.model.views import ReasoningDeltas

    channel = EventChannel(limit=100)
    channel.put_many([reasoning(i, "x") for i in range(1, 5001)])
    batch = await channel.get()
    assert channel.overflows == 0 and batch is not RESYNC and batch is not None
    (joined,) = batch
    assert isinstance(joined, ReasoningDeltas) and (joined.seq, joined.last_seq) == (1, 5000)
    view = reduce(empty_view(), joined)
    assert view.reasoning["e"] == "x" * 5000 and not view.resync_required
    view = reduce(view, reasoning(5001, "y"))  # the run's next seq goes on from it
    assert not view.resync_required and view.cursors["r"].seq == 5001
    assert view.reasoning["e"] == "x" * 5000 + "y"


def test_reasoning_deltas_are_reduced_in_linear_time():
    """1 MB of reasoning in 40-character deltas: concatenating the whole text per delta
    (as the reducer did) took 17 s here; appending costs the delta (about 1 s)."""
    import time

    view, started = empty_view(), time.process_time()  # CPU time: load does not stretch it
    for seq in range(1, 25_001):
        view = reduce(view, reasoning(seq, "0123456789" * 4))
    took = time.process_time() - started
    assert len(str(view.reasoning["e"])) == 1_000_000 and not view.resync_required
    assert took < 4.0, f"reducing 1 MB of reasoning took {took:.1f} s"
