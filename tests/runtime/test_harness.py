"""The model loop and the Harness API against a scripted provider."""

from __future__ import annotations

import asyncio
import json

import pytest

from runtime import EmptyInput
from runtime.model.llm import ProviderError, ToolCall, Usage
from runtime.model.records import InboxMode
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import (
    RecordingToolbox,
    open_harness,
    streaming_text,
    until_awaiting_approval,
    until_stored,
)

pytestmark = pytest.mark.usefixtures("store_kind")


async def start(tmp_path, turns, toolbox=None, approval="ask", interactive=True, **settings):
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, toolbox, **settings)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": approval}
    )
    await harness.drive(conv.id, interactive=interactive)
    return harness, conv, provider


async def test_answer_is_committed_with_usage(tmp_path):
    harness, conv, provider = await start(
        tmp_path, [ScriptedTurn(text="Hello there", usage=Usage(11, 3))]
    )
    item = await harness.submit(conv.id, "hi")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    assert run.usage["input_tokens"] == 11 and run.usage["output_tokens"] == 3
    snap = await harness.store.snapshot(conv.id)
    assert [(e.kind, e.status, e.text) for e in snap.entries] == [
        ("user", "complete", "hi"),
        ("assistant", "complete", "Hello there"),
    ]
    assert snap.conversation.title == "hi"
    request = provider.requests[0]
    assert request.messages[0].role == "system"
    assert request.messages[-1].content == "hi"
    await harness.close()


async def test_same_request_key_admits_once(tmp_path):
    harness, conv, provider = await start(tmp_path, [ScriptedTurn(text="once")])
    first = await harness.submit(conv.id, "do it", request_key="key-1")
    second = await harness.submit(conv.id, "do it", request_key="key-1")
    assert first.id == second.id and first.run_id == second.run_id
    await harness.wait(first.id, conv.id)
    third = await harness.submit(conv.id, "do it", request_key="key-1")
    assert third.run_id == first.run_id
    snap = await harness.store.snapshot(conv.id)
    assert len(snap.runs) == 1 and len(provider.requests) == 1
    await harness.close()


async def test_admission_is_durable_before_the_provider_is_called(tmp_path):
    seen = {}

    class Checking(ScriptedProvider):
        async def stream(self, request):
            snap = await harness.store.snapshot(conv.id)
            seen["entries"] = [(e.kind, e.text) for e in snap.entries]
            seen["runs"] = [r.state for r in snap.runs]
            async for item in super().stream(request):
                yield item

    provider = Checking([ScriptedTurn(text="ok")])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "persist me")
    await harness.wait(item.id, conv.id)
    assert ("user", "persist me") in seen["entries"]
    assert seen["runs"] == ["running"]
    await harness.close()


async def test_partial_text_is_checkpointed_while_streaming(tmp_path):
    gate = asyncio.Event()

    class Slow(ScriptedProvider):
        async def stream(self, request):
            async for item in super().stream(request):
                yield item
            await gate.wait()

    provider = Slow([ScriptedTurn(text="abcdefghij" * 5, chunk_size=5, delay=0.01)])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "go")
    snap = await until_stored(harness.store, conv.id, streaming_text, "a partial committed")
    partial = next(e for e in snap.entries if e.kind == "assistant")
    assert partial.status == "streaming" and partial.text.startswith("abcde")
    gate.set()
    await harness.wait(item.id, conv.id)
    await harness.close()


async def test_retryable_error_retries_with_attempt_reset(tmp_path):
    turns = [
        ScriptedTurn(
            text="broken partial",
            error=ProviderError("HTTP 503", provider="s", status=503, retryable=True),
            error_after_chunks=1,
        ),
        ScriptedTurn(text="good answer"),
    ]
    harness, conv, provider = await start(tmp_path, turns)
    sub = harness.subscribe(conv.id)
    item = await harness.submit(conv.id, "hi")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    snap = await harness.store.snapshot(conv.id)
    assert [e.text for e in snap.entries if e.kind == "assistant"] == ["good answer"]
    assert any(e.type == "attempt.reset" for e in sub.pending())
    assert len(provider.requests) == 2
    await harness.close()


async def test_non_retryable_error_fails_the_run_and_keeps_the_partial(tmp_path):
    turns = [
        ScriptedTurn(
            text="half of it",
            chunk_size=4,
            error=ProviderError("bad request", provider="s", status=400, retryable=False),
            error_after_chunks=1,
        )
    ]
    harness, conv, _ = await start(tmp_path, turns)
    item = await harness.submit(conv.id, "hi")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "failed" and run.error["message"] == "bad request"
    snap = await harness.store.snapshot(conv.id)
    answer = next(e for e in snap.entries if e.kind == "assistant")
    assert answer.status == "failed" and answer.text == "half"
    await harness.close()


def tool_turn(name, args, call_id="call_1"):
    return ScriptedTurn(tool_calls=(ToolCall(call_id, name, json.dumps(args)),))


async def test_tool_round_trip_with_full_auto(tmp_path):
    toolbox = RecordingToolbox()
    harness, conv, provider = await start(
        tmp_path,
        [tool_turn("write_file", {"path": "a.txt"}), ScriptedTurn(text="wrote it")],
        toolbox=toolbox,
        approval="full-auto",
    )
    item = await harness.submit(conv.id, "write a file")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    assert toolbox.calls == [("write_file", {"path": "a.txt"})]
    second = provider.requests[1].messages
    assert second[-2].tool_calls[0].name == "write_file"
    assert second[-1].role == "tool" and second[-1].content == "write_file ok"
    snap = await harness.store.snapshot(conv.id)
    assert [c.state for c in snap.tool_calls] == ["done"]
    await harness.close()


async def test_non_interactive_refuses_what_would_ask(tmp_path):
    toolbox = RecordingToolbox()
    refused = []
    provider = ScriptedProvider([tool_turn("write_file", {"path": "a"}), ScriptedTurn(text="ok")])
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, interactive=False, on_refusal=lambda n, t: refused.append(n))
    item = await harness.submit(conv.id, "write")
    await harness.wait(item.id, conv.id)
    assert toolbox.calls == [] and refused == ["write_file"]
    told = provider.requests[1].messages[-1].content
    assert "REFUSED FORBIDDEN" in told and "--approval-mode" in told
    await harness.close()


async def test_approval_waits_in_the_store_and_runs_when_approved(tmp_path):
    toolbox = RecordingToolbox()
    harness, conv, _ = await start(
        tmp_path,
        [tool_turn("run_command", {"command": "ls"}), ScriptedTurn(text="done")],
        toolbox=toolbox,
        approval="ask",
    )
    item = await harness.submit(conv.id, "list")
    snap = await until_awaiting_approval(harness, conv.id)
    assert snap.tool_calls[0].approval == "pending" and toolbox.calls == []
    await harness.respond(conv.id, snap.tool_calls[0].id, approve=True)
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed" and toolbox.calls == [("run_command", {"command": "ls"})]
    await harness.close()


async def test_busy_submit_is_a_follow_up_and_steers_join_after_the_tool_round(tmp_path):
    toolbox = RecordingToolbox(gate=asyncio.Event())
    turns = [
        tool_turn("read_file", {"path": "x"}),
        ScriptedTurn(text="first done"),
        ScriptedTurn(text="follow-up done"),
    ]
    harness, conv, provider = await start(tmp_path, turns, toolbox=toolbox)
    first = await harness.submit(conv.id, "start")
    await until(lambda: toolbox.calls, "the tool call")
    follow = await harness.submit(conv.id, "and then this")
    steer = await harness.submit(conv.id, "use tabs", mode=InboxMode.STEER)
    assert follow.state == "queued" and steer.state == "queued"
    toolbox.gate.set()
    assert (await harness.wait(first.id, conv.id)).state == "completed"
    assert (await harness.wait(follow.id, conv.id)).state == "completed"
    second_request = provider.requests[1].messages
    assert [m.role for m in second_request[-3:]] == ["assistant", "tool", "user"]
    assert second_request[-1].content == "use tabs"
    assert provider.requests[2].messages[-1].content == "and then this"
    await harness.close()


async def test_withdraw_a_queued_follow_up(tmp_path):
    toolbox = RecordingToolbox(gate=asyncio.Event())
    harness, conv, provider = await start(
        tmp_path,
        [tool_turn("read_file", {"path": "x"}), ScriptedTurn(text="done")],
        toolbox=toolbox,
    )
    first = await harness.submit(conv.id, "start")
    await until(lambda: toolbox.calls, "the tool call")
    later = await harness.submit(conv.id, "never mind")
    assert await harness.withdraw(conv.id, later.id)
    toolbox.gate.set()
    await harness.wait(first.id, conv.id)
    await asyncio.sleep(0.1)  # (the thing under test: the withdrawn input starts no run)
    snap = await harness.store.snapshot(conv.id)
    assert len(snap.runs) == 1 and len(provider.requests) == 2
    await harness.close()


async def test_interrupt_keeps_the_partial_marked_interrupted(tmp_path):
    harness, conv, _ = await start(
        tmp_path, [ScriptedTurn(text="x" * 400, chunk_size=4, delay=0.01)]
    )
    item = await harness.submit(conv.id, "long")
    await until_stored(harness.store, conv.id, streaming_text, "a partial committed")
    assert await harness.interrupt(conv.id)
    run = await harness.wait(item.id, conv.id)
    assert run.state == "interrupted"
    snap = await harness.store.snapshot(conv.id)
    answer = next(e for e in snap.entries if e.kind == "assistant")
    assert answer.status == "interrupted" and 0 < len(answer.text) < 400
    await harness.close()


async def test_empty_prompt_is_refused_and_nothing_stored(tmp_path):
    harness, conv, _ = await start(tmp_path, [])
    before = (await harness.get_conversation(conv.id)).version
    with pytest.raises(EmptyInput):
        await harness.submit(conv.id, "   \n")
    assert (await harness.get_conversation(conv.id)).version == before
    await harness.close()


async def test_interrupt_during_a_slow_checkpoint_never_duplicates_text(tmp_path, monkeypatch):
    """A commit the interrupt cancels still lands (it is shielded); what the loop
    remembers as committed must say so, or the final checkpoint appends it twice."""
    import time

    from runtime.store.tx import Tx

    real_finish = Tx.finish

    def slow_finish(self):
        time.sleep(0.03)  # (the thing under test: a slow commit, inside the transaction)
        real_finish(self)

    monkeypatch.setattr(Tx, "finish", slow_finish)
    text = "".join(f"{i:04d} " for i in range(400))
    for delay in (0.01, 0.03, 0.05, 0.08, 0.11, 0.17, 0.23):
        harness, conv, _ = await start(
            tmp_path / str(delay), [ScriptedTurn(text=text, chunk_size=5, delay=0.002)],
            checkpoint_interval=0.01,
        )  # fmt: skip
        item = await harness.submit(conv.id, "long")
        await asyncio.sleep(delay)  # (the thing under test: interrupts at many moments)
        await harness.interrupt(conv.id)
        run = await harness.wait(item.id, conv.id)
        assert run.state == "interrupted"
        snap = await harness.store.snapshot(conv.id)
        for answer in (e for e in snap.entries if e.kind == "assistant"):  # none if too early
            assert answer.status == "interrupted"
            assert text.startswith(answer.text), answer.text[:80]
        await harness.close()


async def test_command_output_streams_as_transient_deltas(tmp_path):
    from runtime import reduce
    from runtime.model.events import ToolOutputDelta

    toolbox = RecordingToolbox()
    harness, conv, _ = await start(
        tmp_path, [tool_turn("run_command", {"command": "make"}), ScriptedTurn(text="built")],
        toolbox=toolbox, approval="full-auto",
    )  # fmt: skip
    view = await harness.snapshot(conv.id)
    sub = harness.subscribe(conv.id)
    item = await harness.submit(conv.id, "build it")
    await harness.wait(item.id, conv.id)
    events = sub.pending()
    outputs = [e for e in events if isinstance(e, ToolOutputDelta)]
    assert [e.text for e in outputs] == ["line one\n", "line two\n"]
    for event in events:
        view = reduce(view, event)
    assert not view.resync_required
    (call,) = view.tool_calls
    assert call.provider_id == "call_1" and call.id != "call_1"  # a key of its own
    assert view.tool_output[call.id] == "line one\nline two\n"
    await harness.close()


async def test_a_tool_that_raises_fails_only_its_call(tmp_path):
    class Broken(RecordingToolbox):
        async def run(self, name, arguments, on_output=None, on_start=None):
            raise RuntimeError("disk on fire at /home/someone/secret")

    harness, conv, provider = await start(
        tmp_path, [tool_turn("read_file", {"path": "x"}), ScriptedTurn(text="recovered")],
        toolbox=Broken(),
    )  # fmt: skip
    item = await harness.submit(conv.id, "read")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    told = provider.requests[1].messages[-1].content
    assert "REFUSED INTERNAL" in told and "RuntimeError" in told and "/home" not in told
    await harness.close()
