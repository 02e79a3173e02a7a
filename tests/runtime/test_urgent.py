"""Issue 37 item 6 (seed 000's interrupt-next): an urgent input stops the run going at
its next safe point (a tool call going ends first; a stream is cut) and runs before
ordinary queued work, keeping its inbox item id throughout, across a crash too
(runtime.run.urgent)."""

from __future__ import annotations

import asyncio
import random

import pytest

from runtime.ipc.local import local_client
from runtime.model.events import InboxUpdated
from runtime.model.records import InboxMode
from runtime.run.urgent import URGENT_REASON
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tests.runtime.test_redirect import COMMAND, start, until

pytestmark = pytest.mark.usefixtures("store_kind")

URGENT = InboxMode.INTERRUPT_NEXT


def last_user(request) -> str:
    return str([m.content for m in request.messages if m.role == "user"][-1])


async def running_command(harness, conv_id):
    await until(lambda v: any(c.state == "running" for c in v.tool_calls), harness, conv_id,
                "the command to run")  # fmt: skip


async def test_urgent_waits_for_the_call_going_then_runs_before_queued_work(tmp_path):
    turns = [ScriptedTurn(text="Testing.", tool_calls=(COMMAND,)),
             ScriptedTurn(text="Urgent done."), ScriptedTurn(text="B done.")]  # fmt: skip
    harness, conv_id, provider, toolbox = await start(tmp_path, turns)
    client = await local_client(harness, owner=False)  # through the protocol, as attach/ACP
    try:
        a = await client.submit(conv_id, "run the tests")
        await running_command(harness, conv_id)
        b = await client.submit(conv_id, "then B", mode=InboxMode.FOLLOW_UP)
        c = await client.submit(conv_id, "fix prod now", mode=URGENT)
        assert c.state == "queued"
        view = await harness.snapshot(conv_id)
        [call] = view.tool_calls
        assert call.state == "running"  # never cut mid-effect
        assert toolbox.gate is not None
        toolbox.gate.set()
        cut = await client.wait(a.id, conv_id)
        assert (cut.state, cut.reason) == ("interrupted", URGENT_REASON)
        urgent_run = await client.wait(c.id, conv_id)
        b_run = await client.wait(b.id, conv_id)
        assert urgent_run.state == b_run.state == "completed"
        assert urgent_run.inbox_id == c.id and urgent_run.created_at < b_run.created_at
        assert [last_user(r) for r in provider.requests[1:]] == ["fix prod now", "then B"]
        view = await harness.snapshot(conv_id)
        assert [c.state for c in view.tool_calls] == ["done"]  # its result was kept
        assert toolbox.calls == [("run_command", {"command": "make test"})]
        ledger = await harness.ledger(conv_id)
        states = [e.item.state for e in ledger if isinstance(e, InboxUpdated) and e.item.id == c.id]
        assert states == ["queued", "placed"]  # one identity, seen in the ledger
    finally:
        await client.close()
        await harness.close()


class FirstHangs(ScriptedProvider):
    """The first request streams a line and then hangs; the rest are scripted."""

    def __init__(self, turns):
        super().__init__(turns)
        self.streamed = asyncio.Event()
        self.first = True

    async def stream(self, request):
        if self.first:
            self.first = False
            self.requests.append(request)
            from runtime.model.llm import TextChunk

            yield TextChunk("Thinking about it")
            self.streamed.set()
            await asyncio.Event().wait()
        async for item in super().stream(request):
            yield item


async def test_urgent_cuts_a_stream_and_keeps_the_partial_marked(tmp_path):
    provider = FirstHangs([ScriptedTurn(text="On it.")])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    a = await harness.submit(conv.id, "think")
    await asyncio.wait_for(provider.streamed.wait(), 30)
    await until(lambda v: any(v.text_of(e) for e in v.entries if e.kind == "assistant"),
                harness, conv.id, "the partial checkpointed")  # fmt: skip
    c = await harness.submit(conv.id, "stop and do this", mode=URGENT)
    cut = await harness.wait(a.id, conv.id)
    assert (cut.state, cut.reason) == ("interrupted", URGENT_REASON)
    assert (await harness.wait(c.id, conv.id)).state == "completed"
    sent = provider.requests[-1].messages
    assert "Thinking about it" in str(sent[-2].content)  # kept, marked cut off
    assert sent[-1].content == "stop and do this"
    await harness.close()


async def test_urgent_items_are_fifo_and_never_cut_an_urgent_run(tmp_path):
    turns = [ScriptedTurn(tool_calls=(COMMAND,)), ScriptedTurn(text="C1 done."),
             ScriptedTurn(text="C2 done.")]  # fmt: skip
    harness, conv_id, _provider, toolbox = await start(tmp_path, turns)
    c1 = await harness.submit(conv_id, "first urgent", mode=URGENT)  # idle: it runs now
    await running_command(harness, conv_id)
    c2 = await harness.submit(conv_id, "second urgent", mode=URGENT)
    assert toolbox.gate is not None
    toolbox.gate.set()
    first, second = await harness.wait(c1.id, conv_id), await harness.wait(c2.id, conv_id)
    assert (first.state, second.state) == ("completed", "completed")
    assert first.created_at < second.created_at
    await harness.close()


async def test_urgent_racing_the_runs_own_end_runs_once_and_loses_nothing(tmp_path):
    """However the urgent input and the run's answer interleave: the run either answers
    or gives way (even before its first request, when the urgent input came first), the
    urgent item runs exactly once under its own id, nothing is left queued. (Random offsets over 20 rounds: each round a different interleaving.)"""
    rounds = 20
    turns = [ScriptedTurn(text="answer " * 20, chunk_size=10, delay=0.001)] * (2 * rounds)
    harness, conv_id, provider, _ = await start(tmp_path, turns)
    rng = random.Random(37)
    for n in range(rounds):
        a = await harness.submit(conv_id, f"question {n}")

        async def urgent(n=n):
            await asyncio.sleep(rng.random() * 0.03)  # (the race: a random moment of the run)
            return await harness.submit(conv_id, f"urgent {n}", mode=URGENT)

        c = await urgent()
        run_a, run_c = await harness.wait(a.id, conv_id), await harness.wait(c.id, conv_id)
        assert run_a.state == "completed" or run_a.reason == URGENT_REASON
        assert run_c.state == "completed" and run_c.inbox_id == c.id
        view = await harness.snapshot(conv_id)
        assert not view.queued_inbox and view.active_run is None
        assert [r.inbox_id for r in view.runs].count(c.id) == 1
    # Each urgent run asked once; each question once, unless it gave way before asking.
    assert rounds <= len(provider.requests) <= 2 * rounds
    await harness.close()


async def test_after_a_crash_the_urgent_item_still_runs_next_under_its_id(tmp_path):
    toolbox = RecordingToolbox(gate=asyncio.Event())
    provider = ScriptedProvider([ScriptedTurn(text="Testing.", tool_calls=(COMMAND,))])
    a = await open_harness(tmp_path, provider, toolbox)
    conv = await a.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await a.drive(conv.id)
    first = await a.submit(conv.id, "run the tests")
    await running_command(a, conv.id)
    b = await a.submit(conv.id, "then B", mode=InboxMode.FOLLOW_UP)
    c = await a.submit(conv.id, "urgent C", mode=URGENT)
    await a.close()  # the crash: the command was going, A is left running

    again = ScriptedProvider([ScriptedTurn(text="C done."), ScriptedTurn(text="B done.")])
    resumed = await open_harness(tmp_path, again, RecordingToolbox())
    await resumed.drive(conv.id)
    cut = await resumed.wait(first.id, conv.id)
    assert (cut.state, cut.reason) == ("interrupted", URGENT_REASON)
    run_c, run_b = await resumed.wait(c.id, conv.id), await resumed.wait(b.id, conv.id)
    assert run_c.state == run_b.state == "completed"
    assert run_c.inbox_id == c.id and run_c.created_at < run_b.created_at
    assert [last_user(r) for r in again.requests] == ["urgent C", "then B"]
    await resumed.close()
