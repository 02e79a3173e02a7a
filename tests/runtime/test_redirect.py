"""Interrupt and redirect in one action (Harness.redirect, runtime.run.redirect):
the running step is cut, its partial output reaches the model marked interrupted, and
the redirect is the next user message, in a new run."""

from __future__ import annotations

import asyncio
import json

import pytest

from runtime.model.llm import ToolCall
from runtime.model.records import InboxMode
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import TIMEOUT
from tests.runtime.helpers import RecordingToolbox, open_harness

pytestmark = pytest.mark.usefixtures("store_kind")

COMMAND = ToolCall("c1", "run_command", json.dumps({"command": "make test"}))


async def until(predicate, harness, conv_id, what: str):
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while asyncio.get_running_loop().time() < deadline:
        view = await harness.snapshot(conv_id)
        if predicate(view):
            return view
        await asyncio.sleep(0.01)  # (poll interval)
    raise AssertionError(f"timed out waiting for {what}")


async def start(tmp_path, turns):
    toolbox = RecordingToolbox(gate=asyncio.Event())  # the command runs until released
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id, interactive=True)
    return harness, conv.id, provider, toolbox


async def test_a_redirect_cuts_the_running_tool_and_becomes_the_next_prompt(tmp_path):
    turns = [ScriptedTurn(text="Running the tests.", tool_calls=(COMMAND,)),
             ScriptedTurn(text="Switching to the linter.")]  # fmt: skip
    harness, conv_id, provider, toolbox = await start(tmp_path, turns)
    first = await harness.submit(conv_id, "run the tests")
    await until(lambda v: any(c.state == "running" for c in v.tool_calls), harness, conv_id,
                "the command to run")  # fmt: skip
    for _ in range(100):  # its output so far is checkpointed (the loop's 20 ms cadence)
        if "line two" in await harness.store.read(
            lambda db: "".join(r[0] for r in db.execute("SELECT text FROM chunks"))
        ):
            break
        await asyncio.sleep(0.02)  # (poll interval)
    else:
        raise AssertionError("the command's output was never checkpointed")
    steer = await harness.submit(conv_id, "also check the docs", mode=InboxMode.STEER)

    cut = await harness.redirect(conv_id, "stop, run the linter instead")
    assert cut.run_id is not None and [i.id for i in cut.withdrawn] == [steer.id]
    assert (await harness.wait(first.id, conv_id)).state == "interrupted"
    second = await harness.wait(cut.item.id, conv_id)
    assert second.state == "completed" and second.id != cut.run_id

    messages = provider.requests[-1].messages
    assert [m.role for m in messages[-3:]] == ["assistant", "tool", "user"]
    result, prompt = str(messages[-2].content), messages[-1].content
    assert result.startswith("INTERRUPTED: run_command was cut off")
    assert "line one\nline two" in result  # what it printed before the cut
    assert prompt == "stop, run the linter instead"
    view = await harness.snapshot(conv_id)
    assert [i.state for i in view.inbox if i.id == steer.id] == ["withdrawn"]
    assert toolbox.calls == [("run_command", {"command": "make test"})]  # not run again
    await harness.close()


async def test_a_retried_redirect_cuts_nothing_more(tmp_path):
    turns = [ScriptedTurn(tool_calls=(COMMAND,)), ScriptedTurn(tool_calls=(COMMAND,))]
    harness, conv_id, _provider, _toolbox = await start(tmp_path, turns)
    first = await harness.submit(conv_id, "run the tests")
    await until(lambda v: any(c.state == "running" for c in v.tool_calls), harness, conv_id,
                "the command to run")  # fmt: skip
    cut = await harness.redirect(conv_id, "the linter instead", request_key="k1")
    assert (await harness.wait(first.id, conv_id)).state == "interrupted"
    await until(lambda v: len([c for c in v.tool_calls if c.state == "running"]) == 1,
                harness, conv_id, "the redirect's run to run its command")  # fmt: skip
    again = await harness.redirect(conv_id, "the linter instead", request_key="k1")
    assert again.item.id == cut.item.id and again.run_id is None and again.withdrawn == ()
    view = await harness.snapshot(conv_id)
    placed = next(i for i in view.inbox if i.id == cut.item.id)
    assert view.active_run is not None and view.active_run.id == placed.run_id  # still going
    assert not view.active_run.interrupt_requested
    await harness.interrupt(conv_id)
    await harness.close()


async def test_with_no_run_going_a_redirect_is_a_prompt(tmp_path):
    harness, conv_id, _provider, _ = await start(tmp_path, [ScriptedTurn(text="Hi.")])
    cut = await harness.redirect(conv_id, "hello")
    assert cut.run_id is None and cut.withdrawn == ()
    assert (await harness.wait(cut.item.id, conv_id)).state == "completed"
    await harness.close()
