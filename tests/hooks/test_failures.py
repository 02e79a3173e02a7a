"""A hook that runs out of time or prints garbage, on every event: one line in the
transcript, no decision, and the run goes on as if the hook were not there."""

from __future__ import annotations

import pytest

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import alive, command, open_session

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart")
TURNS = [{"tool_calls": [command("echo ran > out.txt")]}, {"text": "done"}]

# Starts a background sleeper (its pid in the workspace), then outlives the limit.
SLOW = "sleep 300 & echo $! > bg.pid; sleep 300"
GARBAGE = {
    "not JSON": "echo 'Formatted 3 files'; exit 0",
    "half JSON": """printf '{"decision": "block", "reason": '""",
    "not UTF-8": r"printf '\xff\xfe{\x80}'",
    "huge": "head -c 400000 /dev/zero | tr '\\0' 'x'",
    "bad decision": """echo '{"decision": "maybe"}'""",
}


@pytest.mark.parametrize("event", EVENTS)
async def test_a_hook_that_times_out_is_killed_with_what_it_started(tmp_path, event):
    hooks = {event: [{"command": SLOW, "timeout": 2}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert (s.workspace / "out.txt").read_text() == "ran\n"  # no decision: the call ran
    assert len(notes) == 1 and notes[0].startswith(f"{event} hook `")
    assert "ran past its 2 s limit and was killed" in notes[0]
    assert rows[-1]["outcome"] == "timeout"
    assert not alive(s.workspace / "bg.pid")


@pytest.mark.parametrize("kind", sorted(GARBAGE))
@pytest.mark.parametrize("event", ("PreToolUse", "PostToolUse", "Stop"))
async def test_garbage_on_stdout_is_one_line_and_no_decision(tmp_path, event, kind):
    hooks = {event: [{"command": GARBAGE[kind]}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed" and len(server.requests) == 2
    assert (s.workspace / "out.txt").read_text() == "ran\n"
    assert len(notes) == 1 and "no decision" in notes[0] and "\n" not in notes[0]
    assert "Traceback" not in notes[0]


@pytest.mark.parametrize("kind", ["half JSON", "not UTF-8", "huge", "bad decision"])
@pytest.mark.parametrize("event", ("UserPromptSubmit", "SessionStart"))
async def test_garbage_from_a_context_hook_is_one_line_and_no_context(tmp_path, event, kind):
    hooks = {event: [{"command": GARBAGE[kind]}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert len(notes) == 1 and "no decision" in notes[0]
    assert [m["role"] for m in s.sent()[0]] == ["system", "user"]  # nothing added


async def test_a_hook_that_fails_to_run_is_one_line(tmp_path):
    hooks = {"PreToolUse": [{"command": "/no/such/hook --check"}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert (s.workspace / "out.txt").exists()
    assert len(notes) == 1 and "failed (exit 127)" in notes[0] and "No such file" in notes[0]
