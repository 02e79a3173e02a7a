"""A hook that runs out of time or prints garbage, on every event: one line in the
transcript, and the run goes on. A PreToolUse hook guards its call: failing, it
blocks it (fail closed) unless it has `fail_open = true`; any other event's failure
decides nothing, as if the hook were not there."""

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
    guarded = event == "PreToolUse"  # a guard that failed blocked the call; others: it ran
    assert (s.workspace / "out.txt").exists() is not guarded
    assert len(notes) == 1 and notes[0].startswith(f"{event} hook `")
    assert ("the call is blocked" in notes[0]) is guarded
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
    guarded = event == "PreToolUse"
    assert (s.workspace / "out.txt").exists() is not guarded
    said = "the call is blocked" if guarded else "no decision"
    assert len(notes) == 1 and said in notes[0] and "\n" not in notes[0]
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
    assert not (s.workspace / "out.txt").exists()  # the guard could not run: blocked
    assert len(notes) == 1 and "failed (exit 127)" in notes[0] and "No such file" in notes[0]
    assert "the call is blocked" in notes[0]


async def test_a_guard_with_fail_open_lets_the_call_through_when_it_fails(tmp_path):
    hooks = {"PreToolUse": [{"command": "exit 1", "fail_open": True}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert (s.workspace / "out.txt").read_text() == "ran\n"
    assert len(notes) == 1 and "failed (exit 1)" in notes[0] and "no decision" in notes[0]


def test_fail_open_is_a_guards_alone(tmp_path):
    from runtime.hooks.config import parse_hooks
    from runtime.model.errors import ConfigError

    with pytest.raises(ConfigError, match="only a PreToolUse hook has it"):
        parse_hooks({"PostToolUse": [{"command": "x", "fail_open": True}]}, tmp_path, "user")
