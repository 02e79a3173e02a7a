"""The durable core's promises, one test (or a few) per way it was seen to break them:
repeated provider ids, check-then-act races, a cancelled write, a failing provider,
text shown but not committed, input order, interrupts, request keys, empty sessions,
purges. Races are forced: a delay is injected inside one side's transaction while a
second store (another connection, as another process would have) goes for the same row.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest

from runtime import Harness
from runtime.harness import new_conversation
from runtime.model.errors import NotPending, RequestKeyReused, UnfinishedWork, UnknownConversation
from runtime.model.llm import ToolCall
from runtime.model.records import InboxMode
from runtime.run.calls import interrupt_tx
from runtime.store.database import Store
from runtime.store.tx import Tx
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import TIMEOUT
from tests.runtime.helpers import (
    RecordingToolbox,
    open_harness,
    store_location,
    streaming_text,
    until_awaiting_approval,
    until_stored,
)

pytestmark = pytest.mark.usefixtures("store_kind")


async def start(tmp_path, turns, toolbox=None, approval="full-auto", **settings):
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, toolbox, **settings)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": approval}
    )
    await harness.drive(conv.id)
    return harness, conv, provider


def call(name, path, call_id="call_0"):
    return ScriptedTurn(tool_calls=(ToolCall(call_id, name, json.dumps({"path": path})),))


def assert_valid_openai_sequence(messages):
    """Each assistant message with tool calls is followed by one tool message per id."""
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "assistant" and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            assert len(set(ids)) == len(ids), ids
            replies = [m.tool_call_id for m in messages[i + 1 : i + 1 + len(ids)]]
            assert replies == ids, (ids, replies)
            i += len(ids)
        elif message.role == "tool":
            raise AssertionError(f"a tool message with no call before it: {message}")
        i += 1


# --- 1. tool-call ids ---------------------------------------------------------


async def test_two_turns_and_two_conversations_reusing_one_provider_id(tmp_path):
    """llama.cpp and small proxies send `call_0` every time: each call keeps its own row,
    its own result, and the requests stay valid."""
    toolbox = RecordingToolbox()
    turns = [
        call("read_file", "a"), call("write_file", "b"), ScriptedTurn(text="done one"),
        call("read_file", "c"), ScriptedTurn(text="done two"),
    ]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "first")
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    other = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(other.id, approval_mode="full-auto")
    item2 = await harness.submit(other.id, "second")
    assert (await harness.wait(item2.id, other.id)).state == "completed"

    snap = await harness.store.snapshot(conv.id)
    assert [c.provider_id for c in snap.tool_calls] == ["call_0", "call_0"]
    assert len({c.id for c in snap.tool_calls}) == 2
    results = {e.data["tool_call_id"]: e.data["name"] for e in snap.entries if e.data.get("name")}
    assert [results[c.id] for c in snap.tool_calls] == ["read_file", "write_file"]
    for request in provider.requests:
        assert_valid_openai_sequence(request.messages[1:])
    # The third request (after two rounds) sends both calls, with ids made unique.
    ids = [c.id for m in provider.requests[2].messages for c in m.tool_calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and ids[0] == "call_0"
    snap2 = await harness.store.snapshot(other.id)
    assert snap2.tool_calls[0].provider_id == "call_0" and snap2.tool_calls[0].state == "done"
    await harness.close()


# --- 2. compare-and-set transitions ----------------------------------------------


async def _holding(store: Store, conversation_id: str, then) -> asyncio.Task[object]:
    """A transaction that holds the write lock a while, then does `then(tx)`: started,
    and returned (a task) once it holds the lock."""
    held = threading.Event()

    def body(tx: Tx):
        held.set()
        time.sleep(0.3)  # (the thing under test: the other side goes for the row meanwhile)
        return then(tx)

    task = asyncio.create_task(store.transact(conversation_id, body))
    assert await asyncio.to_thread(held.wait, TIMEOUT), "the transaction never began"
    return task


@pytest.mark.parametrize("first", ["place", "withdraw"])
async def test_withdraw_racing_placement_has_one_winner(tmp_path, first):
    harness, conv, _ = await start(tmp_path, [])
    await harness.release(conv.id)
    other = await Store.open(store_location(tmp_path))  # another connection, as another process
    try:
        await harness.submit(conv.id, "busy")  # makes a run, so the next input queues
        item = await harness.submit(conv.id, "steer me", mode=InboxMode.STEER)
        assert item.state == "queued"

        def place(tx: Tx):
            return tx.transition_inbox(item.id, "placed", run_id="r", entry_id="e")

        if first == "place":
            placing = await _holding(other, conv.id, place)
            withdrawn = await harness.withdraw(conv.id, item.id)
            placed = await placing
            assert placed is not None and withdrawn is False
        else:
            withdrawing = await _holding(
                harness.store, conv.id, lambda tx: tx.transition_inbox(item.id, "withdrawn")
            )
            placed = await other.transact(conv.id, place)
            assert (await withdrawing) is not None and placed is None
        final = await harness.store.inbox_item(item.id)
        assert final.state == ("placed" if first == "place" else "withdrawn")
    finally:
        await other.close()
        await harness.close()


@pytest.mark.parametrize("first", ["interrupt", "respond"])
async def test_respond_racing_interrupt_has_one_winner(tmp_path, first):
    toolbox = RecordingToolbox()
    turns = [call("write_file", "x"), ScriptedTurn(text="after")]
    harness, conv, _ = await start(tmp_path, turns, toolbox, approval="ask")
    item = await harness.submit(conv.id, "write it")
    snap = await until_awaiting_approval(harness, conv.id)
    call_id = snap.tool_calls[0].id
    other = await Store.open(store_location(tmp_path))
    try:
        if first == "interrupt":
            # Another process's interrupt (attach) commits while holding the lock.
            settling = await _holding(other, conv.id, interrupt_tx)
            with pytest.raises(NotPending):
                await harness.respond(conv.id, call_id, approve=True)
            assert (await settling) is not None
        else:
            answering = await _holding(other, conv.id, lambda tx: tx.transition_tool_call(
                call_id, from_states=("pending",), from_approvals=("pending",),
                approval="approved"))  # fmt: skip
            done = await harness.interrupt(conv.id)
            assert done.run_id == item.run_id
            assert (await answering) is not None
        run = await harness.wait(item.id, conv.id)
        assert run.state == "interrupted"
        final = await harness.store.tool_call(call_id)
        assert final.state == "interrupted" and toolbox.calls == []  # never revived
    finally:
        await other.close()
        await harness.close()


# --- 3. a cancelled write never wedges the store --------------------------------------


@pytest.mark.sqlite_only
async def test_write_cancelled_while_another_process_holds_the_lock(tmp_path, monkeypatch):
    harness, conv, _ = await start(tmp_path, [])
    waiting = threading.Event()  # the writer waits for the lock
    real_begin = harness.store._engine._begin

    def begin(*args):
        waiting.set()
        return real_begin(*args)

    monkeypatch.setattr(harness.store._engine, "_begin", begin)
    blocker = sqlite3.connect(harness.store.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        stuck = asyncio.create_task(harness.update_settings(conv.id, instructions="lost"))
        assert await asyncio.to_thread(waiting.wait, TIMEOUT)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    updated = await harness.update_settings(conv.id, instructions="kept")
    assert updated.settings["instructions"] == "kept"
    item = await harness.submit(conv.id, "still works")
    assert item.state == "placed"
    await harness.close()
    # Another process sees no lock left behind.
    check = sqlite3.connect(harness.store.path, timeout=0.5)
    check.execute("BEGIN IMMEDIATE")
    check.execute("ROLLBACK")
    check.close()


# --- 4. supervised driver ---------------------------------------------------------------


class BrokenProvider(ScriptedProvider):
    async def stream(self, request):
        self.requests.append(request)
        yield  # an async generator that breaks its contract
        raise KeyError("choices")


async def test_a_provider_raising_unexpectedly_fails_the_run_and_frees_the_lease(tmp_path):
    provider = BrokenProvider()
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "hi")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "failed" and "KeyError" in run.error["message"]
    view = await harness.snapshot(conv.id)
    assert view.entries[-1].status == "failed"  # the partial is closed, not left streaming
    await harness.close()
    lease = await (await Store.open(store_location(tmp_path))).lease(conv.id)
    assert lease.owner is None


@pytest.mark.sqlite_only
async def test_a_store_failure_mid_run_ends_the_harness_and_leaves_the_run_resumable(
    tmp_path, monkeypatch
):
    """A storage error ends the harness (seed 004; the rest: test_storage_failure.py):
    the run is not written as failed (nothing is written after the error) but left as
    a crash leaves it, for the next process to resume."""
    from runtime.model.errors import SessionFailedError

    harness, conv, _ = await start(
        tmp_path, [ScriptedTurn(text="x" * 50, chunk_size=5, delay=0.01)]
    )

    def failing(self, *args):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Tx, "append_chunk", failing)
    item = await harness.submit(conv.id, "hi")
    with pytest.raises(SessionFailedError, match="disk I/O error"):
        await harness.wait(item.id, conv.id)
    await asyncio.wait_for(harness.wait_closed(), 10)
    other = await Store.open(store_location(tmp_path))
    try:
        (run,) = (await other.snapshot(conv.id)).runs
        assert run.state == "running"  # resumable: the next driver takes it over
    finally:
        await other.close()


# --- 5. nothing shown stays uncommitted past the cadence ----------------------------------


async def test_text_and_reasoning_shown_before_a_pause_are_committed_during_it(tmp_path):
    gate = asyncio.Event()

    class PausingProvider(ScriptedProvider):
        async def stream(self, request):
            async for item in super().stream(request):
                yield item
                if type(item).__name__ == "TextChunk":
                    await gate.wait()  # the model goes quiet after its first words

    provider = PausingProvider([ScriptedTurn(text="first words", reasoning="a thought")])
    harness = await open_harness(tmp_path, provider, checkpoint_interval=0.05)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    await harness.submit(conv.id, "hi")
    other = await Store.open(store_location(tmp_path))  # (another process's view)
    snap = await until_stored(other, conv.id, streaming_text, "the words committed")
    assert snap.entries[-1].status == "streaming"
    assert snap.entries[-1].text == "first words"
    assert snap.entries[-1].data["reasoning"] == "a thought"
    await other.close()
    gate.set()
    await harness.close()


# --- 7. input order and interrupt -----------------------------------------------------------


async def test_a_steer_during_the_final_answer_is_answered_before_a_later_follow_up(tmp_path):
    turns = [
        ScriptedTurn(text="the answer " * 20, chunk_size=10, delay=0.02),
        ScriptedTurn(text="steered"),
        ScriptedTurn(text="followed up"),
    ]
    harness, conv, provider = await start(tmp_path, turns)
    first = await harness.submit(conv.id, "question")
    await until_stored(harness.store, conv.id, streaming_text, "the answer to stream")
    steer = await harness.submit(conv.id, "shorter please", mode=InboxMode.STEER)
    follow = await harness.submit(conv.id, "next task", mode=InboxMode.FOLLOW_UP)
    run = await harness.wait(first.id, conv.id)
    assert run.state == "completed"
    later = await harness.wait(follow.id, conv.id)
    assert later.id != run.id
    placed = await harness.store.inbox_item(steer.id)
    assert placed.run_id == run.id  # joined the running work
    assert [r.messages[-1].content for r in provider.requests[1:]] == [
        "shorter please",
        "next task",
    ]
    await harness.close()


async def test_interrupt_withdraws_queued_inputs_and_hands_them_back(tmp_path):
    turns = [ScriptedTurn(text="slow " * 100, chunk_size=5, delay=0.02)]
    harness, conv, provider = await start(tmp_path, turns)
    item = await harness.submit(conv.id, "go")
    await until_stored(harness.store, conv.id, streaming_text, "the answer to stream")
    a = await harness.submit(conv.id, "steer", mode=InboxMode.STEER)
    b = await harness.submit(conv.id, "later", mode=InboxMode.FOLLOW_UP)
    done = await harness.interrupt(conv.id)
    assert done.run_id == item.run_id
    assert [i.id for i in done.withdrawn] == [a.id, b.id]
    assert (await harness.wait(item.id, conv.id)).state == "interrupted"
    await asyncio.sleep(0.2)  # (the thing under test: nothing starts by itself meanwhile)
    snap = await harness.store.snapshot(conv.id)
    assert len(snap.runs) == 1 and len(provider.requests) == 1  # nothing started by itself
    assert snap.runs[0].interrupt_requested
    await harness.close()


async def test_an_interrupt_committed_by_another_process_stops_the_run(tmp_path):
    turns = [ScriptedTurn(text="slow " * 200, chunk_size=5, delay=0.02)]
    harness, conv, _ = await start(tmp_path, turns)
    item = await harness.submit(conv.id, "go")
    await until_stored(harness.store, conv.id, streaming_text, "the answer to stream")
    attached = await Harness.open(store_location(tmp_path))  # drives nothing
    done = await attached.interrupt(conv.id)
    assert done.run_id == item.run_id
    run = await harness.wait(item.id, conv.id)
    assert run.state == "interrupted"
    await attached.close()
    await harness.close()


# --- 8. request keys ---------------------------------------------------------------------------


async def test_a_request_key_is_admitted_once_across_conversations(tmp_path):
    harness, conv, provider = await start(tmp_path, [ScriptedTurn(text="once")])
    first = await harness.submit(conv.id, "append a line", request_key="k")
    await harness.wait(first.id, conv.id)
    other = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    again = await harness.submit(other.id, "append a line", request_key="k")
    assert again.id == first.id and again.conversation_id == conv.id
    with pytest.raises(RequestKeyReused):
        await harness.submit(conv.id, "something else", request_key="k")
    assert await harness.admitted("k") == (conv.id, first.id)
    assert len(provider.requests) == 1
    await harness.close()


async def test_parallel_request_key_a_prepared_conversation_that_loses_is_not_stored(tmp_path):
    """Issue 25, item 4: two front ends race with one key, each with a new (prepared)
    conversation: the loser gets the winner's item and leaves no conversation behind."""
    winner = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="once")]))
    loser = await open_harness(tmp_path, ScriptedProvider([]))
    try:
        first = new_conversation(str(tmp_path), settings={"model": "s/m"})
        second = new_conversation(str(tmp_path), settings={"model": "s/m"})
        winner.prepare(first)
        loser.prepare(second)
        won = await winner.submit(first.id, "do it", request_key="race")
        lost = await loser.submit(second.id, "do it", request_key="race")
        assert (lost.id, lost.conversation_id) == (won.id, first.id)
        assert [c.id for c in await loser.list_conversations()] == [first.id]
        assert not await loser.store.exists(second.id)
        with pytest.raises(RequestKeyReused):
            await loser.submit(second.id, "something else", request_key="race")
        assert not await loser.store.exists(second.id)
    finally:
        await loser.close()
        await winner.close()


async def test_a_key_racer_that_takes_the_lease_before_the_admitter_runs_it(tmp_path):
    """Issue 25, item 4, the narrow window: a process finds the admitted request key and
    takes the conversation's lease between the admitting process's commit and its
    driver's start. The admitter's submit still returns the item (it follows the run in
    the store) and the racer runs it: one model request, no failure."""
    admitter = await open_harness(tmp_path, ScriptedProvider([]))
    racer = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="once")]))
    try:
        conv = new_conversation(str(tmp_path), settings={"model": "s/m"})
        admitter.prepare(conv)
        assert await admitter.drive(conv.id, interactive=False) is None  # deferred
        starting = admitter._start_driver

        async def racer_first(conversation_id, **options):
            found = await racer.admitted("race")
            assert found is not None and found[0] == conversation_id
            await racer.drive(conversation_id, interactive=False)
            await starting(conversation_id, **options)  # ConversationBusy inside

        admitter._start_driver = racer_first  # (the window, made to happen)
        item = await admitter.submit(conv.id, "do it", request_key="race")
        again = await racer.submit(conv.id, "do it", request_key="race")
        assert again.id == item.id
        assert (await admitter.wait(item.id, conv.id, poll=0.02)).state == "completed"
    finally:
        await racer.close()
        await admitter.close()


# --- 9. sessions that hold nothing -------------------------------------------------------------


async def test_a_prepared_conversation_is_stored_only_with_its_first_prompt(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="hello")])
    harness = await open_harness(tmp_path, provider)
    conv = new_conversation(str(tmp_path), settings={"model": "s/m"})
    harness.prepare(conv)
    assert await harness.drive(conv.id) is None  # waits for the conversation
    view = await harness.snapshot(conv.id)
    assert view.entries == () and view.version == 0
    assert await harness.list_conversations() == []
    item = await harness.submit(conv.id, "hi")
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    [stored] = await harness.list_conversations(with_entries=True)
    assert stored.id == conv.id and stored.title == "hi"
    ledger = await harness.ledger(conv.id)
    assert [e.type for e in ledger[:2]] == ["conversation.created", "inbox.updated"]
    await harness.close()

    quitter = await open_harness(tmp_path / "q", ScriptedProvider())
    quitter.prepare(new_conversation(str(tmp_path), settings={"model": "s/m"}))
    await quitter.close()
    reopened = await Harness.open(tmp_path / "q" / "bastion.sqlite")
    assert await reopened.list_conversations() == []
    await reopened.close()


# --- 10. purge -----------------------------------------------------------------------------------


async def test_delete_removes_everything_and_never_reuses_the_id(tmp_path):
    harness, conv, _ = await start(tmp_path, [ScriptedTurn(text="x")])
    item = await harness.submit(conv.id, "hi")
    await harness.wait(item.id, conv.id)
    spilled = harness.home / "artifacts" / conv.id
    spilled.mkdir(parents=True)
    (spilled / "out-1.txt").write_text("secret output")
    with pytest.raises(UnfinishedWork):  # its driver is alive
        await harness.delete_conversation(conv.id)
    await harness.release(conv.id)
    await harness.delete_conversation(conv.id)
    assert not spilled.exists()
    with pytest.raises(UnknownConversation):
        await harness.snapshot(conv.id)
    with pytest.raises(UnknownConversation, match="not used again"):
        await harness.create_conversation(str(tmp_path), conversation_id=conv.id)
    await harness.close()


async def test_delete_refuses_unfinished_work_unless_forced(tmp_path):
    harness = await open_harness(tmp_path, ScriptedProvider())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.submit(conv.id, "queued, never run")  # no driver: the run stays queued
    with pytest.raises(UnfinishedWork, match="unfinished work"):
        await harness.delete_conversation(conv.id)
    await harness.delete_conversation(conv.id, force=True)
    assert await harness.list_conversations() == []
    await harness.close()


async def test_a_store_failing_while_closing_does_not_hang(tmp_path, monkeypatch, caplog):
    """`-p -c` once never exited after "database disk image is malformed" in the lease
    release: closing reports it and goes on."""
    from runtime.model.errors import StoreCorrupt

    harness, conv, _ = await start(tmp_path, [ScriptedTurn(text="x")])
    item = await harness.submit(conv.id, "hi")
    await harness.wait(item.id, conv.id)

    async def malformed(*args, **kwargs):
        raise StoreCorrupt("database disk image is malformed")

    monkeypatch.setattr(Store, "release_lease", malformed)
    await asyncio.wait_for(harness.close(), 30)
    said = [
        r.getMessage() for r in caplog.records if "could not release the lease" in r.getMessage()
    ]
    assert len(said) == 1 and "database disk image is malformed" in said[0], caplog.text


# --- 12. each text stored once -------------------------------------------------------------


@pytest.mark.sqlite_only
async def test_the_ledger_reads_back_the_events_that_were_published(tmp_path):
    """Payloads leave out what the tables keep (texts, arguments); read back, every
    event equals the one published."""
    from runtime.model.events import is_durable

    toolbox = RecordingToolbox()
    turns = [
        ScriptedTurn(text="looking " * 30, reasoning="think " * 20, chunk_size=7, delay=0.002,
                     tool_calls=(ToolCall("c", "write_file", json.dumps({"path": "p", "content": "x" * 500})),)),
        ScriptedTurn(text="done " * 40, chunk_size=9, delay=0.002),
    ]  # fmt: skip
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, toolbox, checkpoint_interval=0.005)
    sub = harness.subscribe()
    conv = new_conversation(str(tmp_path), settings={"model": "s/m"})
    harness.prepare(conv)
    await harness.drive(conv.id, approval_mode="full-auto")
    item = await harness.submit(conv.id, "write p " * 50)
    await harness.wait(item.id, conv.id)
    published = [e for e in sub.pending() if is_durable(e)]
    stored = await harness.ledger(conv.id)
    assert [e.version for e in stored] == list(range(1, len(stored) + 1))
    assert [e for e in published if e.conversation_id == conv.id] == stored
    kinds = {e.type for e in stored}
    assert {"entry.text_appended", "entry.reasoning_appended", "entry.closed"} <= kinds
    db = sqlite3.connect(harness.store.path)
    payloads = "".join(p for (p,) in db.execute("SELECT payload FROM ledger"))
    db.close()
    for word in ("looking", "think think", "write p " * 20, "x" * 100):
        at = payloads.find(word)
        assert at < 0, payloads[max(0, at - 300) : at + 50]
    await harness.close()
