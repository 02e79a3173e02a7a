"""A process that stops mid-run leaves work another process finishes from the store."""

from __future__ import annotations

import asyncio
import json

import pytest

from runtime.context.messages import CONTINUE
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import (
    RecordingToolbox,
    open_harness,
    until_awaiting_approval,
    until_stored,
)

pytestmark = pytest.mark.usefixtures("store_kind")


async def stopped_during_tool(tmp_path, tool: str):
    """Harness A starts `tool`, then stops while it runs (as a crash would leave it)."""
    blocking = RecordingToolbox(gate=asyncio.Event())
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=(ToolCall("call_1", tool, json.dumps({"path": "f"})),))]
    )
    a = await open_harness(tmp_path, provider, blocking)
    conv = await a.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await a.drive(conv.id)
    item = await a.submit(conv.id, "go")
    await until(lambda: blocking.calls, "the tool call")
    await a.close()
    return conv, item


async def test_side_effecting_call_is_reported_interrupted_not_rerun(tmp_path):
    conv, item = await stopped_during_tool(tmp_path, "write_file")
    toolbox = RecordingToolbox()
    provider = ScriptedProvider([ScriptedTurn(text="checked the workspace")])
    b = await open_harness(tmp_path, provider, toolbox)
    snap = await b.store.snapshot(conv.id)
    assert snap.runs[0].state == "running" and snap.tool_calls[0].state == "running"
    await b.drive(conv.id)
    run = await b.wait(item.id, conv.id)
    assert run.state == "completed"
    assert toolbox.calls == []  # not replayed
    told = provider.requests[0].messages[-1]
    assert told.role == "tool" and "effects are unknown" in told.content
    snap = await b.store.snapshot(conv.id)
    assert snap.tool_calls[0].state == "interrupted"
    await b.close()


async def test_replay_safe_call_is_run_again(tmp_path):
    conv, item = await stopped_during_tool(tmp_path, "read_file")
    toolbox = RecordingToolbox()
    provider = ScriptedProvider([ScriptedTurn(text="read it")])
    b = await open_harness(tmp_path, provider, toolbox)
    await b.drive(conv.id)
    run = await b.wait(item.id, conv.id)
    assert run.state == "completed" and toolbox.calls == [("read_file", {"path": "f"})]
    assert provider.requests[0].messages[-1].content == "read_file ok"
    await b.close()


async def stopped_awaiting_approval(tmp_path, toolbox):
    """An interactive harness asks to approve `run_command`, then stops before an answer."""
    provider = ScriptedProvider(
        [ScriptedTurn(tool_calls=(ToolCall("call_1", "run_command", '{"command": "ls"}'),))]
    )
    a = await open_harness(tmp_path, provider, toolbox)
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    item = await a.submit(conv.id, "list")
    await until_awaiting_approval(a, conv.id)
    await a.close()
    return conv, item


async def test_pending_approval_survives_a_restart(tmp_path):
    toolbox = RecordingToolbox()
    conv, item = await stopped_awaiting_approval(tmp_path, toolbox)

    provider_b = ScriptedProvider([ScriptedTurn(text="listed")])
    b = await open_harness(tmp_path, provider_b, toolbox)
    snap = await b.store.snapshot(conv.id)
    assert snap.tool_calls[0].approval == "pending"
    await b.drive(conv.id)
    await b.respond(conv.id, snap.tool_calls[0].id, approve=True)
    run = await b.wait(item.id, conv.id)
    assert run.state == "completed" and toolbox.calls == [("run_command", {"command": "ls"})]
    await b.close()


async def test_queued_follow_ups_run_in_order_after_restart(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="slow " * 50, chunk_size=5, delay=0.02)])
    a = await open_harness(tmp_path, provider)
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    first = await a.submit(conv.id, "first")
    second = await a.submit(conv.id, "second")
    third = await a.submit(conv.id, "third")
    await until_stored(
        a.store,
        conv.id,
        lambda snap: any(e.kind == "assistant" and e.text for e in snap.entries),
        "part of the first answer committed",
    )
    await a.close()

    provider_b = ScriptedProvider(
        [ScriptedTurn(text="one"), ScriptedTurn(text="two"), ScriptedTurn(text="three")]
    )
    b = await open_harness(tmp_path, provider_b)
    await b.drive(conv.id)
    for item in (first, second, third):
        assert (await b.wait(item.id, conv.id)).state == "completed"
    asked = [r.messages[-1].content for r in provider_b.requests]
    # The first run's kept partial is sent cut off, then a note to go on from it
    # (issue 25, item 5): its prompt is the last message before the partial.
    assert asked == [CONTINUE, "second", "third"]
    assert provider_b.requests[0].messages[-3].content == "first"
    snap = await b.store.snapshot(conv.id)
    texts = [(e.kind, e.status) for e in snap.entries if e.kind == "assistant"]
    assert texts[0] == ("assistant", "interrupted")
    await b.close()


async def test_a_non_interactive_resume_refuses_a_pending_approval(tmp_path):
    """An approval asked in the app, then `bastion -p --resume`: print mode cannot ask,
    so the call is refused (the model is told why) and the run finishes."""
    toolbox = RecordingToolbox()
    conv, item = await stopped_awaiting_approval(tmp_path, toolbox)

    provider_b = ScriptedProvider([ScriptedTurn(text="could not run it")])
    b = await open_harness(tmp_path, provider_b, toolbox)
    await b.drive(conv.id, interactive=False)
    run = await asyncio.wait_for(b.wait(item.id, conv.id), timeout=10)
    assert run.state == "completed" and toolbox.calls == []
    assert "cannot ask" in provider_b.requests[0].messages[-1].content
    snap = await b.store.snapshot(conv.id)
    assert snap.tool_calls[0].state == "denied"
    await b.close()
