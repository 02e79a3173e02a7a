"""Issue 41: a harness that follows a conversation another process drives, through the
store alone (runtime.harness.following), on SQLite and on PostgreSQL.

Harness A drives; harness B (its own store connection, as on another machine) follows:
it sees A's answer grow checkpoint by checkpoint, its prompts, interrupts and approval
answers reach A through the store, ops that act inside A are refused naming A, and
when A lets the session go B takes it over. B never takes a lease A still heartbeats,
and a ledger row B cannot read (forged, or from a newer bastion) does not stop it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from runtime import Harness, reduce
from runtime.harness import following
from runtime.model.errors import DrivenElsewhere, NotPending
from runtime.model.llm import ToolCall
from runtime.model.views import ConversationView
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import RecordingToolbox, open_harness, until_stored

pytestmark = pytest.mark.usefixtures("store_kind")

ANSWER = "".join(f"{i:03d} " for i in range(120))


class Screen:
    """What a front end of harness B shows: its view, folded from B's events by the
    reducer (a resync reads the snapshot again), and each length the answer had."""

    def __init__(self, harness: Harness, conversation_id: str) -> None:
        self.harness = harness
        self.id = conversation_id
        self.view: ConversationView | None = None
        self.lengths: list[int] = []
        self.resyncs = 0
        self._sub = harness.subscribe(conversation_id)
        self._task = asyncio.ensure_future(self._fold())

    async def _fold(self) -> None:
        self.view = await self.harness.snapshot(self.id)
        async for event in self._sub:
            view = reduce(self.view, event)
            if view.resync_required:
                self.resyncs += 1
                view = await self.harness.snapshot(self.id)
            self.view = view
            answers = [e for e in view.settled if e.kind == "assistant"]
            if answers and view.text_of(answers[-1]):
                size = len(view.text_of(answers[-1]))
                if not self.lengths or self.lengths[-1] != size:
                    self.lengths.append(size)

    def answers(self) -> list[tuple[str, str]]:
        view = self.view
        if view is None:
            return []
        return [(e.status, str(view.text_of(e))) for e in view.settled if e.kind == "assistant"]

    async def close(self) -> None:
        self._sub.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def two(
    tmp_path: Path, turns: list[ScriptedTurn], b_turns: tuple[ScriptedTurn, ...] = ()
) -> tuple[Any, ...]:
    """A (driving a new conversation, approvals asked) and B (following it; its model
    answers `b_turns` once it drives)."""
    toolbox = RecordingToolbox()
    a = await open_harness(tmp_path, ScriptedProvider(turns), toolbox)
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id, approval_mode="ask")
    b = await open_harness(tmp_path, ScriptedProvider(b_turns), RecordingToolbox())
    at = await b.follow(conv.id)
    assert at is not None and at.pid == os.getpid()
    return a, b, conv.id, toolbox


async def test_a_follower_sees_the_answer_grow_and_end_as_the_driver_commits(tmp_path):
    a, b, cid, _ = await two(tmp_path, [ScriptedTurn(text=ANSWER, chunk_size=8, delay=0.01)])
    screen = Screen(b, cid)
    try:
        await a.submit(cid, "count")
        await until(lambda: screen.answers() == [("complete", ANSWER)], "B to show A's answer")
        assert len(screen.lengths) >= 3, screen.lengths  # it grew, checkpoint by checkpoint
        assert screen.lengths == sorted(screen.lengths)
        await a.wait_idle(cid, poll=0.05)
        final = await a.store.version(cid)  # (the run's end commits after its answer's)
        await until(lambda: screen.view.version == final, "B to reach A's last version")
        assert b.driver(cid) is None  # B follows; A drives
    finally:
        await screen.close()
        await b.close()
        await a.close()


async def test_a_followers_prompt_and_interrupt_reach_the_driver_and_driver_ops_are_refused(
    tmp_path,
):
    turns = [ScriptedTurn(text="FIRST"), ScriptedTurn(text=ANSWER * 5, chunk_size=4, delay=0.02)]
    a, b, cid, _ = await two(tmp_path, turns)
    screen = Screen(b, cid)
    try:
        await b.submit(cid, "a prompt from B")  # admitted; A's idle poll picks it up
        await until(lambda: screen.answers() == [("complete", "FIRST")], "A to answer B")
        await b.submit(cid, "a long one")
        await until(lambda: len(screen.answers()) == 2 and screen.lengths[-1] > 20, "streaming")
        done = await b.interrupt(cid)
        assert done.run_id is not None
        run = await a.wait_run(done.run_id, cid, poll=0.05)
        assert run.state == "interrupted"
        await until(lambda: screen.answers()[-1][0] == "interrupted", "B to see the interrupt")
        for op in (
            b.set_model(cid, "s/other"),
            b.set_approval_mode(cid, "full-auto"),
            b.compact(cid),
            b.cancel_compaction(cid),
            b.stop_job(cid, "1"),
        ):
            with pytest.raises(DrivenElsewhere) as refused:
                await op
            assert f"pid {os.getpid()}" in refused.value.message
        assert (await a.session_settings(cid)).model == "s/m"  # nothing changed in A
    finally:
        await screen.close()
        await b.close()
        await a.close()


async def test_an_approval_answered_by_a_follower_and_the_driver_at_once_is_decided_once(
    tmp_path,
):
    write = ToolCall("c1", "write_file", '{"path": "x"}')
    a, b, cid, toolbox = await two(
        tmp_path, [ScriptedTurn(tool_calls=(write,)), ScriptedTurn(text="DONE")]
    )
    screen = Screen(b, cid)
    try:
        await a.submit(cid, "write x")
        await until(
            lambda: screen.view is not None and screen.view.runs
            and screen.view.runs[-1].state == "awaiting_approval",
            "B to see the approval asked",
        )  # fmt: skip
        (call,) = screen.view.tool_calls
        answers = await asyncio.gather(
            b.respond(cid, call.id, False), a.respond(cid, call.id, True), return_exceptions=True
        )
        lost = [x for x in answers if isinstance(x, BaseException)]
        assert len(lost) == 1 and isinstance(lost[0], NotPending), answers
        approved = not isinstance(answers[1], BaseException)
        await until(lambda: screen.answers()[-1:] == [("complete", "DONE")], "the run to end")
        assert toolbox.calls == ([("write_file", {"path": "x"})] if approved else [])
        stored = await a.store.tool_call(call.id)
        assert stored is not None and stored.approval == ("approved" if approved else "denied")
    finally:
        await screen.close()
        await b.close()
        await a.close()


async def test_a_follower_answers_an_approval_the_driver_waits_for(tmp_path):
    write = ToolCall("c1", "write_file", '{"path": "x"}')
    a, b, cid, toolbox = await two(
        tmp_path, [ScriptedTurn(tool_calls=(write,)), ScriptedTurn(text="DONE")]
    )
    try:
        await a.submit(cid, "write x")
        snap = await until_stored(
            b.store, cid, lambda s: s.tool_calls and s.tool_calls[0].approval == "pending",
            "the approval",
        )  # fmt: skip
        await b.respond(cid, snap.tool_calls[0].id, True)  # A hears it on its approval poll
        await until_stored(b.store, cid, lambda s: s.runs[-1].state == "completed", "the end")
        assert toolbox.calls == [("write_file", {"path": "x"})]
    finally:
        await b.close()
        await a.close()


async def test_a_follower_takes_the_session_over_when_its_driver_lets_it_go(tmp_path):
    a, b, cid, _ = await two(tmp_path, [ScriptedTurn(text="FIRST")], (ScriptedTurn(text="FROM B"),))
    screen = Screen(b, cid)
    try:
        await a.submit(cid, "first")
        await until(lambda: screen.answers() == [("complete", "FIRST")], "A's answer")
        await a.close()  # A lets the session go (its lease released)
        await until(lambda: b.driver(cid) is not None, "B to take the session over")
        assert b.following(cid) is None
        await until(lambda: screen.view.lease_pid == os.getpid(), "B's view to say so")
        await b.submit(cid, "second")
        await until(lambda: screen.answers()[-1:] == [("complete", "FROM B")], "B to drive")
        assert [t for _, t in screen.answers()] == ["FIRST", "FROM B"]  # nothing lost
    finally:
        await screen.close()
        await b.close()


async def test_a_follower_racing_a_live_drivers_heartbeat_never_takes_its_lease(
    tmp_path, monkeypatch
):
    """The lease is A's on another host (so only its heartbeat keeps it: no pid to look
    at) and lives 1.5 s, beaten every 0.5 s; B reads it every 10 ms while A streams for
    about 3 s. B never takes it: A's token stays, A's fenced writes all commit."""
    monkeypatch.setattr(following, "LEASE_POLL", 0.0)
    monkeypatch.setattr(following, "FOLLOW_POLL", 0.01)
    turns = [ScriptedTurn(text=ANSWER * 2, chunk_size=8, delay=0.03)]
    toolbox = RecordingToolbox()
    a = await open_harness(tmp_path, ScriptedProvider(turns), toolbox)
    a.lease_ttl = 1.5
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    cid = conv.id
    await a.store._write(
        lambda db: db.execute(
            "UPDATE conversations SET lease_host = 'machine-a' WHERE id = ?", (cid,)
        )
    )
    token = (await a.store.lease(cid)).token
    b = await open_harness(tmp_path, ScriptedProvider([]))
    b.lease_ttl = 1.5
    writes: list[object] = []
    real_write = b.store._write

    async def counted(body: Any, on_done: Any = None) -> Any:
        writes.append(body)  # (every write of B's store, a lease taken included, goes here)
        return await real_write(body, on_done)

    monkeypatch.setattr(b.store, "_write", counted)
    try:
        assert await b.follow(cid) is not None
        item = await a.submit(cid, "stream")
        run = await a.wait(item.id, cid, poll=0.05)
        assert run.state == "completed"
        lease = await a.store.lease(cid)
        assert (lease.token, lease.host) == (token, "machine-a")
        assert b.driver(cid) is None and b.following(cid) is not None
        assert a.driver(cid) is not None and a.driver(cid).failure is None
        assert writes == []  # a follower reads only
    finally:
        await b.close()
        await a.close()


async def test_a_ledger_row_the_follower_cannot_read_does_not_stop_it(tmp_path, store_kind):
    """A row no bastion wrote (its payload garbage) lands between two of A's commits: B
    says so in its log, reads the view again from the tables, and goes on following.
    A NUL and escape codes in the answer arrive as data."""
    text = "nul \x00 and \x1b[2J escape"
    turns = [ScriptedTurn(text="FIRST"), ScriptedTurn(text=text)]
    a, b, cid, _ = await two(tmp_path, turns)
    screen = Screen(b, cid)
    try:
        await a.submit(cid, "first")
        await until(lambda: screen.answers() == [("complete", "FIRST")], "A's first answer")

        def forge(db: Any) -> None:
            version = db.execute("SELECT version FROM conversations WHERE id = ?", (cid,))
            (now,) = version.fetchone()
            db.execute(
                "INSERT INTO ledger (conversation_id, seq, type, payload, time) "
                "VALUES (?, ?, 'entry.added', '{\"entry\": [1, 2', 0)",
                (cid, now + 1),
            )
            db.execute("UPDATE conversations SET version = ? WHERE id = ?", (now + 1, cid))

        await a.store._write(forge)
        await a.submit(cid, "second")
        stored = text.replace("\x00", "\u2400") if store_kind == "postgresql" else text
        await until(lambda: screen.answers()[-1:] == [("complete", stored)], "A's 2nd answer")
        assert screen.resyncs >= 1
        assert b.following(cid) is not None
    finally:
        await screen.close()
        await b.close()
        await a.close()
