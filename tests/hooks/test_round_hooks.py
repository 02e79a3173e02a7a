"""PostResponse and PostToolBatch (bastion's own hooks, the seed's `afterResponse` and
`afterTools`): PostResponse sees each committed response (text, calls, usage) and may
tell the model something before its next request, at most once per response, a
resume included; PostToolBatch sees a whole tool round with its results, may tell
the model something, or stops the run there. Like every hook: killed at its time
limit, its output capped, one line each."""

from __future__ import annotations

import json

import pytest

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import alive, command, open_session, script
from tests.hooks.test_resume import count, stopped_during_hook

pytestmark = pytest.mark.usefixtures("store_kind")

TURNS = [{"tool_calls": [command("echo ran > out.txt")]}, {"text": "done"}]
TWO_CALLS = [
    {"tool_calls": [command("echo one > one.txt"), command("echo two > two.txt")]},
    {"tool_calls": [command("echo three > three.txt")]},
    {"text": "done"},
]


def logging_hook(tmp_path, name: str, context: str):
    """A hook that appends its stdin to `name`.log and answers `context` for the model."""
    answer = json.dumps({"hookSpecificOutput": {"additionalContext": context}})
    return script(
        tmp_path / "hooks", f"{name}.sh",
        f"cat >> {name}.log; echo >> {name}.log\necho '{answer}'\n",
    )  # fmt: skip


def logged(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def test_post_response_sees_each_response_and_its_context_reaches_the_model(tmp_path):
    hook = logging_hook(tmp_path, "response", "the style guide says: short answers")
    hooks = {"PostResponse": [{"command": str(hook)}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    first, second = logged(s.workspace / "response.log")
    assert first["hook_event_name"] == "PostResponse"
    assert first["tool_calls"] == [
        {"tool_name": "run_command", "tool_input": {"command": "echo ran > out.txt"}}
    ]
    assert first["usage"]["input_tokens"] > 0 and first["usage"]["output_tokens"] > 0
    assert second["last_assistant_message"] == "done" and second["tool_calls"] == []
    # told before the next request: after the call's result, as a user message
    last = s.sent()[1][-1]
    assert last["role"] == "user" and "the style guide says: short answers" in last["content"]
    assert "[PostResponse hook `" in last["content"]
    assert [(r["hook_event"], r["state"]) for r in rows] == [
        ("PostResponse", "started"), ("PostResponse", "done"),
    ] * 2  # fmt: skip


async def test_a_post_response_hook_a_stop_cut_off_does_not_run_again(tmp_path):
    hooks = {"PostResponse": [{"command": "echo $$ > hook.pid; echo seen >> resp.log; sleep 30"}]}
    a, item_id = await stopped_during_hook(tmp_path, hooks, "resp.log")
    assert not alive(a.workspace / "hook.pid")  # killed as bastion stopped
    quick = {"PostResponse": [{"command": "echo seen >> resp.log"}]}
    try:
        b = await open_session(tmp_path, a.server, quick, conversation_id=a.conversation_id)
        try:
            run = await b.harness.wait(item_id, b.conversation_id, poll=0.05)
            notes = await b.notes()
            rows = await b.hook_rows()
        finally:
            await b.harness.close()
    finally:
        await a.server.__aexit__(None, None, None)
    assert run.state == "completed" and count(b.workspace / "out.txt") == ["ran"]
    # once for the cut-off response (not again), once for the answer after the resume
    assert count(b.workspace / "resp.log") == ["seen", "seen"]
    assert [r["state"] for r in rows] == ["started", "interrupted", "started", "done"]
    assert len(notes) == 1 and "was cut off when bastion stopped; it is not run again" in notes[0]


async def test_post_tool_batch_runs_once_a_round_with_every_result(tmp_path):
    hook = logging_hook(tmp_path, "batch", "both files exist now")
    hooks = {"PostToolBatch": [{"command": str(hook)}]}
    async with LoopbackServer(TWO_CALLS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    rounds = logged(s.workspace / "batch.log")
    assert len(rounds) == 2  # two rounds, one run each
    calls = rounds[0]["tool_calls"]
    assert [c["tool_input"]["command"] for c in calls] == [
        "echo one > one.txt",
        "echo two > two.txt",
    ]
    assert all(c["tool_response"]["ok"] for c in calls)
    assert [c["tool_input"]["command"] for c in rounds[1]["tool_calls"]] == [
        "echo three > three.txt"
    ]
    second = s.sent()[1]
    assert [m["role"] for m in second[-3:]] == ["tool", "tool", "user"]  # after both results
    assert "both files exist now" in second[-1]["content"]
    assert [(r["hook_event"], r["state"]) for r in rows] == [
        ("PostToolBatch", "started"), ("PostToolBatch", "done"),
    ] * 2  # fmt: skip


async def test_a_post_tool_batch_block_ends_the_run_there(tmp_path):
    hook = script(tmp_path / "hooks", "gate.sh", "echo 'the tests fail: stop here' >&2\nexit 2\n")
    hooks = {"PostToolBatch": [{"command": str(hook)}]}
    async with LoopbackServer(TWO_CALLS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert run.reason is not None and run.reason.startswith("stopped by PostToolBatch hook `")
    assert "the tests fail: stop here" in run.reason
    assert len(server.requests) == 1  # no request after the round
    assert (s.workspace / "two.txt").exists() and not (s.workspace / "three.txt").exists()
    assert len(notes) == 1 and "stopped the run after its tool round" in notes[0]


SLOW = "sleep 300 & echo $! > bg.pid; sleep 300"
HUGE = "head -c 400000 /dev/zero | tr '\\0' 'x'"
RUNS = {"PreRequest": 2, "PostResponse": 2, "PostToolBatch": 1}  # per run of TURNS


@pytest.mark.parametrize("event", sorted(RUNS))
async def test_a_new_hook_that_hangs_is_killed_with_what_it_started(tmp_path, event):
    hooks = {event: [{"command": SLOW, "timeout": 1}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed" and len(server.requests) == 2
    assert (s.workspace / "out.txt").exists()
    assert len(notes) == RUNS[event]
    assert all(n.startswith(f"{event} hook `") and "\n" not in n for n in notes)
    assert all("ran past its 1 s limit and was killed" in n for n in notes)
    assert not alive(s.workspace / "bg.pid")


@pytest.mark.parametrize("event", sorted(RUNS))
async def test_a_new_hook_that_prints_too_much_is_one_line(tmp_path, event):
    hooks = {event: [{"command": HUGE}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed" and len(server.requests) == 2
    assert [m["role"] for m in s.sent()[0]] == ["system", "user"]  # as it was
    assert len(notes) == RUNS[event]
    assert all("printed more than 256 KiB on stdout; ignored" in n for n in notes)
