"""Interrupt and redirect in the app: with a command running, text typed in the prompt
and Ctrl+G (or Ctrl+Enter, where the terminal reports it) cuts the step and goes in as
the next user message; a queued steer comes back to the prompt, as with Esc."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.model.llm import ToolCall
from runtime.model.records import EntryKind, InboxMode, RunState
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, notices, run_settled, wait_for
from tui.app import BastionApp
from tui.widgets import PromptInput

COMMAND = ToolCall("c1", "run_command", json.dumps({"command": "make test"}))


def command_running(app: BastionApp) -> bool:
    view = app.view
    return bool(view and any(c.state == "running" for c in view.tool_calls))


#: A real command that runs until it is cut (it notes that it started, once per run).
LONG = "echo started >> ran.txt; sleep 120"


def long_command(call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "name": "run_command", "arguments": {"command": LONG}}


@pytest.mark.parametrize("key", ["ctrl+s", "ctrl+enter"])
async def test_the_redirect_key_cuts_the_running_command_and_sends_the_text(harness_process, key):
    proc = harness_process([{"text": "Running the tests.", "tool_calls": [long_command()]},
                            {"text": "Linting instead."}])  # fmt: skip
    app = proc.app(first_prompt="run the tests", approval_mode="full-auto")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: command_running(app), pilot)
        await pilot.press(*"check the docs", "enter")  # a steer, queued behind the step
        await wait_for(lambda: bool(app.view and app.view.queued_inbox), pilot)
        await pilot.press(*"lint instead", key)
        await wait_for(lambda: run_settled(app) and len(app.view.runs) == 2, pilot)
        # the queued steer came back to the prompt, as Esc gives it back
        await wait_for(lambda: app.query_one(PromptInput).value == "check the docs", pilot)
    snap = await proc.snapshot()
    assert [r.state for r in snap.runs] == [RunState.INTERRUPTED, RunState.COMPLETED]
    [steer] = [i for i in snap.inbox if i.text == "check the docs"]
    assert (steer.mode, steer.state) == (InboxMode.STEER, "withdrawn")
    users = [e.text for e in snap.entries if e.kind == EntryKind.USER]
    assert users == ["run the tests", "lint instead"]
    messages = proc.requests[-1].body["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    assert str(messages[-2]["content"]).startswith("INTERRUPTED: run_command was cut off")
    assert messages[-1]["content"] == "lint instead"
    assert [json.loads(c.arguments) for c in snap.tool_calls] == [{"command": LONG}]
    assert (proc.work / "ran.txt").read_text() == "started\n"  # run once, not again


async def test_with_no_run_the_redirect_key_sends_like_enter(harness_process, tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="Hello.")])
    proc = harness_process(provider)
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.view is not None, pilot)
        await pilot.press(*"hi", "ctrl+s")
        await wait_for(lambda: run_settled(app), pilot)
    snap = await proc.snapshot()
    assert [r.state for r in snap.runs] == [RunState.COMPLETED]
    assert [e.text for e in snap.entries if e.kind == EntryKind.USER] == ["hi"]


async def test_the_redirect_key_in_the_attached_app_reaches_the_driving_process(harness_process):
    turns = [{"text": "Set up."}, {"tool_calls": [long_command()]}, {"text": "Linting instead."}]
    proc = harness_process(turns)
    owner, conv_id = await proc.driving("set up", approval_mode="full-auto")
    app = proc.attached(conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            # (said once the first view is drawn, just after `ready`)
            await wait_for(lambda: "live from the process driving it" in notices(app), pilot)
            await pilot.press(*"run the tests", "enter")
            await wait_for(lambda: command_running(app), pilot)
            await pilot.press(*"lint instead", "ctrl+s")
            await wait_for(lambda: run_settled(app) and len(app.view.runs) == 3, pilot)
            assert app.view.entries[-1].text == "Linting instead."
            await pilot.press("ctrl+c", "ctrl+c")
        snap = await owner.snapshot(conv_id)  # the driving process's, over its protocol
        assert [r.state for r in snap.runs][1:] == [RunState.INTERRUPTED, RunState.COMPLETED]
        assert proc.requests[-1].body["messages"][-1]["content"] == "lint instead"
    finally:
        await owner.close()
