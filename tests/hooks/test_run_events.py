"""UserPromptSubmit, SessionStart and Stop: a blocked prompt never reaches the model,
context a hook adds does, and a run's end runs its Stop hook."""

from __future__ import annotations

import json

import pytest

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import open_session, script

pytestmark = pytest.mark.usefixtures("store_kind")


async def test_a_blocked_prompt_never_reaches_the_model(tmp_path):
    guard = script(
        tmp_path / "hooks", "secrets.sh",
        'if grep -q "sk-live" ; then echo "the prompt holds a secret key" >&2; exit 2; fi\n',
    )  # fmt: skip
    hooks = {"UserPromptSubmit": [{"command": str(guard)}]}
    async with LoopbackServer([{"text": "hello"}]) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            blocked = await s.prompt("deploy with sk-live-123")
            sent_after_block = len(server.requests)
            fine = await s.prompt("what is 2+2")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert blocked.state == "failed" and blocked.error["code"] == "hook_blocked"
    assert "the prompt holds a secret key" in blocked.error["message"]
    assert sent_after_block == 0  # no model request for the blocked prompt
    assert fine.state == "completed"
    assert "sk-live" not in s.sent_text(0) and "what is 2+2" in s.sent_text(0)
    assert len(notes) == 1 and "blocked: the prompt holds a secret key" in notes[0]


async def test_prompt_context_and_allow(tmp_path):
    hooks = {
        "UserPromptSubmit": [
            {"command": "cat > prompt.json; echo 'The branch is main.'"},  # plain text: context
            {"command": "exit 0"},  # allows, says nothing
        ]
    }
    async with LoopbackServer([{"text": "ok"}]) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("which branch?")
        finally:
            await s.harness.close()
    assert run.state == "completed"
    messages = s.sent()[0]
    assert messages[-2] == {"role": "user", "content": "which branch?"}
    assert messages[-1]["role"] == "user" and "The branch is main." in messages[-1]["content"]
    event = json.loads((s.workspace / "prompt.json").read_text())
    assert event["hook_event_name"] == "UserPromptSubmit" and event["prompt"] == "which branch?"


async def test_session_start_runs_once_per_process_with_context(tmp_path):
    hooks = {
        "SessionStart": [
            {
                "command": "cat >> starts.jsonl; echo >> starts.jsonl; "
                """echo '{"hookSpecificOutput": {"additionalContext": "Ticket ABC-1 is open."}}'"""
            }
        ]
    }
    async with LoopbackServer([{"text": "one"}, {"text": "two"}]) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("first")
            await s.prompt("second")
        finally:
            await s.harness.close()
    starts = (s.workspace / "starts.jsonl").read_text().splitlines()
    assert [json.loads(x)["source"] for x in starts] == ["startup"]
    assert "Ticket ABC-1 is open." in s.sent_text(0)
    assert "Ticket ABC-1 is open." in s.sent_text(1)  # it stays in the conversation


async def test_stop_runs_before_the_run_is_answered(tmp_path):
    hooks = {"Stop": [{"command": "cat > stop.json"}]}
    async with LoopbackServer([{"text": "answer"}]) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("hi")
            rows = await s.hook_rows()
            notes = await s.notes()
        finally:
            await s.harness.close()
    event = json.loads((s.workspace / "stop.json").read_text())
    assert event["hook_event_name"] == "Stop" and event["last_assistant_message"] == "answer"
    assert event["stop_hook_active"] is False
    assert [(r["state"], r["run_id"]) for r in rows] == [("started", run.id), ("done", run.id)]
    assert run.state == "completed" and notes == []


async def test_a_stop_block_keeps_the_run_going_a_bounded_number_of_times(tmp_path):
    hooks = {"Stop": [{"command": "cat >> stops.jsonl; echo >> stops.jsonl; "
                       "echo 'keep going: tests fail' >&2; exit 2"}]}  # fmt: skip
    turns = [{"text": f"answer {i}"} for i in range(4)]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("hi")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed" and len(server.requests) == 4  # 1 + 3 continuations
    told = s.sent()[1][-1]
    assert told["role"] == "user" and "keep going: tests fail" in told["content"]
    stops = [json.loads(x) for x in (s.workspace / "stops.jsonl").read_text().splitlines()]
    assert [x["stop_hook_active"] for x in stops] == [False, True, True, True]
    assert len(notes) == 4 and "at most 3 times, so it ends" in notes[-1]


async def test_a_session_start_block_is_a_line_for_the_user_not_the_model(tmp_path):
    hooks = {"SessionStart": [{"command": "echo 'VPN is down' >&2; exit 2"}]}
    async with LoopbackServer([{"text": "ok"}]) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("hi")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed" and "VPN is down" not in s.sent_text(0)
    assert len(notes) == 1 and "VPN is down" in notes[0]
