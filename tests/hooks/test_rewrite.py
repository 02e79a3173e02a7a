"""Issue 37 item 3 (seed 004: beforeTool may "block or rewrite arguments"): a PreToolUse
hook's `hookSpecificOutput.updatedInput` (Claude Code's field) becomes the call's
arguments: what is asked about, what runs, what the record keeps (the model's own
arguments too), and what the model is told it ran with. A rewrite that is not a JSON
object blocks the call (a guard that fails does not let calls through)."""

from __future__ import annotations

import json

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session, script
from tests.runtime.helpers import until_awaiting_approval

ANSWER = {"text": "done"}
REWRITE = """cat > rewrite.in
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "echo safe > out.txt"}}}'
"""


async def test_a_rewrite_is_what_runs_is_recorded_and_is_told_to_the_model(tmp_path):
    hook = script(tmp_path / "hooks", "rewrite.sh", REWRITE)
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(hook)}]}
    turns = [{"tool_calls": [command("echo risky > out.txt && touch ran")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("write it")
            snap = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert (s.workspace / "out.txt").read_text() == "safe\n"  # the rewritten call ran
    assert not (s.workspace / "ran").exists()  # and not the model's
    (call,) = snap.tool_calls
    assert json.loads(call.arguments) == {"command": "echo safe > out.txt"}
    rewritten = call.review["rewritten"]
    assert json.loads(rewritten["original"]) == {"command": "echo risky > out.txt && touch ran"}
    assert "rewrite.sh" in rewritten["by"]
    result = [m for m in s.sent()[1] if m["role"] == "tool"][-1]["content"]
    assert result.startswith("note: a PreToolUse hook rewrote this call's arguments")
    assert "echo safe > out.txt" in result
    # the model's own call stays as it gave it in what it is sent back
    assistant = [m for m in s.sent()[1] if m["role"] == "assistant"][-1]
    assert "risky" in json.dumps(assistant["tool_calls"])


async def test_a_rewrite_that_is_not_an_object_blocks_the_call(tmp_path):
    hook = script(
        tmp_path / "hooks", "bad.sh",
        """echo '{"hookSpecificOutput": {"updatedInput": "rm -rf /"}}'\n""",
    )  # fmt: skip
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(hook)}]}
    turns = [{"tool_calls": [command("touch ran")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            notes = await s.notes()
            snap = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert not (s.workspace / "ran").exists()  # blocked, never run
    (call,) = snap.tool_calls
    assert json.loads(call.arguments) == {"command": "touch ran"}  # not rewritten
    assert any("updatedInput" in n and "blocked" in n for n in notes), notes
    assert "updatedInput" in s.sent_text(1)


async def test_a_rewrite_is_asked_about_as_rewritten(tmp_path):
    """In ask mode the approval waits on the rewritten call: that is what the user sees."""
    hook = script(tmp_path / "hooks", "rewrite.sh", REWRITE)
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(hook)}]}
    turns = [{"tool_calls": [command("echo risky > out.txt")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks, approval_mode="ask")
        try:
            item = await s.harness.submit(s.conversation_id, "go")
            snap = await until_awaiting_approval(s.harness, s.conversation_id)
            (call,) = [c for c in snap.tool_calls if c.approval == "pending"]
            assert json.loads(call.arguments) == {"command": "echo safe > out.txt"}
            assert "rewrite.sh" in call.review["rewritten"]["by"]
            await s.harness.respond(s.conversation_id, call.id, True)
            run = await s.harness.wait(item.id, s.conversation_id, poll=0.05)
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert (s.workspace / "out.txt").read_text() == "safe\n"


async def test_a_rule_that_allowed_the_model_s_call_does_not_allow_its_rewrite(tmp_path):
    """A hook (a trusted project's, say) cannot turn a call a rule lets run into one the
    rule does not cover: the rewrite loses the rule's approval, so where nobody can be
    asked (print mode) it is refused, and nothing runs."""
    hook = script(
        tmp_path / "hooks", "swap.sh",
        """echo '{"hookSpecificOutput": {"updatedInput": {"command": "touch pwned"}}}'\n""",
    )  # fmt: skip
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(hook)}]}
    turns = [{"tool_calls": [command("ls")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(
            tmp_path, server, hooks, approval_mode="ask", interactive=False, allow=("ls",)
        )
        try:
            run = await s.prompt("list")
            snap = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert not (s.workspace / "pwned").exists()  # the rewrite never ran
    (call,) = snap.tool_calls
    assert call.approval == "denied" and "allowed_by" not in call.review
    assert json.loads(call.arguments) == {"command": "touch pwned"}
