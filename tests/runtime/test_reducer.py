"""The one reducer: a snapshot plus the published events equals the stored end state,
and a dropped, duplicated or reordered event never produces a wrong screen."""

from __future__ import annotations

import asyncio
import random
from types import MappingProxyType

from msgspec.structs import replace

from runtime import reduce, view_from_snapshot
from runtime.model.events import (
    AttemptReset,
    EntryTextAppended,
    EntryUpdated,
    TextDelta,
    is_durable,
)
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness


async def recorded_run(tmp_path):
    provider = ScriptedProvider(
        [ScriptedTurn(text="The quick brown fox jumps. " * 20, chunk_size=7, delay=0.002)]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    start = await harness.snapshot(conv.id)
    sub = harness.subscribe(conv.id)
    item = await harness.submit(conv.id, "go")
    await harness.wait(item.id, conv.id)
    await asyncio.sleep(0)  # (yield to the loop: the run's last events reach `sub`)
    events = sub.pending()
    end = await harness.snapshot(conv.id)
    await harness.close()
    return start, events, end


def fold(view, events):
    for event in events:
        view = reduce(view, event)
    return view


def visible(view):
    return [(e.id, e.kind, e.status, e.text) for e in view.entries], [
        (r.id, r.state) for r in view.runs
    ]


async def test_snapshot_plus_events_is_the_end_state(tmp_path):
    start, events, end = await recorded_run(tmp_path)
    assert any(isinstance(e, TextDelta) for e in events)
    assert any(isinstance(e, EntryTextAppended) for e in events)
    view = fold(start, events)
    assert not view.resync_required
    assert view.version == end.version
    assert visible(view) == visible(end)


async def test_duplicates_are_ignored(tmp_path):
    start, events, end = await recorded_run(tmp_path)
    doubled = [e for event in events for e in (event, event)]
    view = fold(start, doubled)
    assert not view.resync_required
    assert visible(view) == visible(end)


async def test_a_dropped_delta_requires_resync(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDelta)]
    dropped = events[: deltas[2]] + events[deltas[2] + 1 :]
    assert fold(start, dropped).resync_required


async def test_a_dropped_durable_event_requires_resync(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    durable = [i for i, e in enumerate(events) if is_durable(e)]
    dropped = events[: durable[1]] + events[durable[1] + 1 :]
    assert fold(start, dropped).resync_required


async def test_reordered_deltas_require_resync(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDelta)]
    a, b = deltas[1], deltas[2]
    swapped = list(events)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    assert fold(start, swapped).resync_required


async def test_random_faults_never_show_wrong_text(tmp_path):
    """Whatever is dropped, duplicated or swapped: either resync, or exactly the truth."""
    start, events, end = await recorded_run(tmp_path)
    rng = random.Random(7)
    for _ in range(200):
        mutated = list(events)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(mutated))
            action = rng.choice(("drop", "dup", "swap"))
            if action == "drop":
                mutated.pop(i)
            elif action == "dup":
                mutated.insert(i, mutated[i])
            elif i + 1 < len(mutated):
                mutated[i], mutated[i + 1] = mutated[i + 1], mutated[i]
        view = fold(start, mutated)
        if not view.resync_required:
            texts = {e.id: e.text for e in view.entries}
            for entry in end.entries:
                if entry.id in texts:
                    assert end.entry(entry.id).text.startswith(texts[entry.id])


async def test_joining_mid_stream_without_cursor_requires_resync(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    late = replace(start, version=10**6)  # as if the durable part were already known
    assert reduce(late, deltas[3]).resync_required


async def test_attempt_reset_clears_the_partial(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    first_delta = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    view = fold(start, events[: first_delta + 2])
    delta = events[first_delta]
    entry_id = delta.entry_id
    assert view.entry(entry_id).text
    reset = AttemptReset(
        delta.conversation_id,
        delta.run_id,
        delta.epoch,
        view.cursors[delta.run_id].seq + 1,
        entry_id,
        2,
        "HTTP 500",
    )
    view = reduce(view, reset)
    assert view.entry(entry_id).text == ""
    assert not view.resync_required


def test_view_from_snapshot_is_pure_data():
    from runtime.model.records import Conversation
    from runtime.store.database import Snapshot

    conv = Conversation("c", "", "/", {}, 0.0, 0.0, version=3)
    view = view_from_snapshot(Snapshot(conv, (), (), (), ()))
    assert view.version == 3 and not view.resync_required


def test_tool_output_keeps_only_a_bounded_tail():
    from runtime.model.events import ToolOutputDelta
    from runtime.model.records import Conversation
    from runtime.model.views import TOOL_OUTPUT_TAIL
    from runtime.store.database import Snapshot

    view = view_from_snapshot(Snapshot(Conversation("c", "", "/", {}, 0.0, 0.0), (), (), (), ()))
    for seq in range(1, 101):
        view = reduce(view, ToolOutputDelta("c", "r", 1, seq, "t", f"{seq:05d}" + "x" * 995))
    kept = view.tool_output["t"]
    assert len(kept) == TOOL_OUTPUT_TAIL and kept.endswith("x" * 995)
    assert not view.resync_required


def joined(events):
    """Consecutive TextDeltas of one run and entry as one TextDeltas, as a channel joins them."""
    from runtime.model.views import TextDeltas

    out = []
    for event in events:
        last = out[-1] if out else None
        if (
            isinstance(event, TextDelta)
            and isinstance(last, TextDelta | TextDeltas)
            and last.run_id == event.run_id
            and last.entry_id == event.entry_id
            and (last.last_seq if isinstance(last, TextDeltas) else last.seq) + 1 == event.seq
            and last.offset + len(last.text) == event.offset
        ):
            first_seq = last.seq
            out[-1] = TextDeltas(
                event.conversation_id,
                event.run_id,
                event.epoch,
                first_seq,
                event.seq,
                event.entry_id,
                last.offset,
                last.text + event.text,
            )
        else:
            out.append(event)
    return out


async def test_joined_deltas_give_the_same_view(tmp_path):
    start, events, end = await recorded_run(tmp_path)
    batched = joined(events)
    assert len(batched) < len(events)
    view = fold(start, batched)
    assert not view.resync_required
    assert visible(view) == visible(end)
    assert view.cursors == fold(start, events).cursors


async def test_a_gap_inside_joined_deltas_requires_resync(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDelta)]
    dropped = events[: deltas[3]] + events[deltas[3] + 1 :]
    assert fold(start, joined(dropped)).resync_required


async def test_streaming_text_is_live_and_folded_on_demand(tmp_path):
    start, events, _ = await recorded_run(tmp_path)
    first = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    view = fold(start, events[: first + 5])
    entry_id = events[first].entry_id
    live = view.live[entry_id]
    assert str(live) == view.entry(entry_id).text
    assert view.entries[-1].text == str(live)
    assert view._settled_entry(entry_id).text == ""  # the settled record is not rewritten


def test_live_text_values_never_see_each_others_appends():
    from runtime.model.views import LiveText

    a = LiveText.of("ab")
    b = a.append("cd")
    c = b.append("ef")
    d = b.append("XY")  # b is no longer the newest: this branches off a copy
    assert (str(a), str(b), str(c), str(d)) == ("ab", "abcd", "abcdef", "abcdXY")
    assert c.slice(1, 5) == "bcde" and c.slice(3) == "def" and c.slice(6) == ""
    assert d.slice(0, 100) == "abcdXY"
    assert b._chunks is c._chunks and d._chunks is not c._chunks


def test_close_entry_keeps_the_streamed_text():
    from runtime.model.records import Conversation, Entry
    from runtime.model.views import ConversationView, LiveText, close_entry

    conv = Conversation("c", "", "/", {}, 0.0, 0.0)
    entry = Entry("e", "c", 0, "assistant", "streaming", "", 0.0)
    view = ConversationView(conv, 1, settled=(entry,))
    view = replace(view, live=MappingProxyType({"e": LiveText.of("hello").append(" world")}))
    closed = close_entry(view, "e", "complete", {"k": 1}, 11)
    assert closed.entry("e").text == "hello world" and closed.entry("e").status == "complete"
    assert not closed.live
    assert close_entry(view, "e", "complete", {}, 12).resync_required


async def test_a_retry_shows_in_the_view_until_the_next_attempt_streams(tmp_path):
    from runtime.model.llm import ProviderError
    from runtime.model.views import Retry

    error = ProviderError("HTTP 503", provider="s", status=503, retryable=True)
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="broken partial", error=error, error_after_chunks=1),
            ScriptedTurn(text="good answer"),
        ]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    view = await harness.snapshot(conv.id)
    sub = harness.subscribe(conv.id)
    run = await harness.wait((await harness.submit(conv.id, "go")).id, conv.id)
    await asyncio.sleep(0)  # (yield to the loop: the run's last events reach `sub`)
    events = sub.pending()
    await harness.close()
    assert run.state == "completed"
    [at] = [i for i, e in enumerate(events) if isinstance(e, AttemptReset)]
    reset = events[at]
    during = fold(view, events[: at + 1])
    assert during.retrying[run.id] == Retry(reset.attempt, reset.delay, reset.reason)
    assert reset.delay > 0
    after = fold(during, events[at + 1 :])
    assert dict(after.retrying) == {}
    # The next streamed event of the run clears it, before the run ends.
    [next_delta] = [e for e in events[at + 1 :] if isinstance(e, TextDelta)][:1]
    assert dict(reduce(during, next_delta).retrying) == {}


async def session_with_tools(tmp_path):
    """Three turns, each a read_file call and an answer: 4 entries a turn (user, call,
    result, answer)."""
    from runtime.model.llm import ToolCall
    from tests.runtime.helpers import RecordingToolbox

    turns = []
    for i in range(3):
        call = ToolCall(f"call_{i}", "read_file", f'{{"path": "f{i}"}}')
        turns += [ScriptedTurn(tool_calls=(call,)), ScriptedTurn(text=f"answer {i}")]
    harness = await open_harness(tmp_path, ScriptedProvider(turns), RecordingToolbox())
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    for i in range(3):
        item = await harness.submit(conv.id, f"question {i}")
        await harness.wait(item.id, conv.id)
    return harness, conv.id


async def test_a_view_of_the_end_has_the_last_entries_and_only_their_tool_calls(tmp_path):
    harness, conv_id = await session_with_tools(tmp_path)
    try:
        whole = await harness.snapshot(conv_id)
        end = await harness.snapshot(conv_id, last=5)
        assert whole.earlier == 0 and len(whole.settled) == 12
        assert end.earlier == 7
        assert end.settled == whole.settled[-5:]
        kept = {e.id for e in end.settled}
        assert end.tool_calls and all(c.entry_id in kept for c in end.tool_calls)
        assert end.tool_calls == tuple(c for c in whole.tool_calls if c.entry_id in kept)
        assert (end.runs, end.version) == (whole.runs, whole.version)
        assert (await harness.snapshot(conv_id, last=50)).settled == whole.settled
    finally:
        await harness.close()


async def test_a_view_of_the_end_folds_new_entries_and_resyncs_on_one_it_left_out(tmp_path):
    start, events, end = await recorded_run(tmp_path)
    partial = replace(start, earlier=3)  # as if three entries came before these
    view = fold(partial, events)  # the run's own entries are added, at the end
    assert not view.resync_required
    assert visible(view) == visible(end)
    added = next(e for e in events if type(e).__name__ == "EntryAdded")
    left_out = added.entry.but(id="not-in-this-view")
    updated = EntryUpdated(added.conversation_id, view.version + 1, left_out)
    assert reduce(view, updated).resync_required
    assert not reduce(replace(view, earlier=0), updated).resync_required  # a whole view
