"""PreToolUse: a hook blocks a call with a reason the model is sent as the call's
result, lets it through, or (the user's own hook only) approves it without a prompt."""

from __future__ import annotations

import json

from runtime.hooks import HookSpec
from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session, script

ANSWER = {"text": "done"}


async def test_exit_2_blocks_the_call_and_the_model_gets_stderr(tmp_path):
    guard = script(
        tmp_path / "hooks",
        "guard.sh",
        'cat > guard.in\necho "no rm here: use git clean" >&2\nexit 2\n',
    )
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(guard)}]}
    turns = [{"tool_calls": [command("rm -rf build && touch ran")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("clean up")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert not (s.workspace / "ran").exists()  # the command never ran
    result = [m for m in s.sent()[1] if m["role"] == "tool"][-1]["content"]
    assert "PreToolUse hook" in result and "no rm here: use git clean" in result
    event = json.loads((s.workspace / "guard.in").read_text())  # the cwd is the workspace
    assert event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "run_command"
    assert event["tool_input"] == {"command": "rm -rf build && touch ran"}
    assert event["session_id"] == s.conversation_id and event["cwd"] == str(s.workspace)
    shown = HookSpec("PreToolUse", str(guard)).shown
    assert notes == [f"PreToolUse hook `{shown}` blocked: no rm here: use git clean"]


async def test_a_json_block_decision_with_a_reason(tmp_path):
    guard = script(
        tmp_path / "hooks", "guard.sh",
        """echo '{"decision": "block", "reason": "edits to generated code are refused"}'\n""",
    )  # fmt: skip
    hooks = {"PreToolUse": [{"matcher": "edit_*|write_file", "command": str(guard)}]}
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "gen.py", "content": "x"}}]},
        ANSWER,
    ]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("write it")
        finally:
            await s.harness.close()
    assert not (s.workspace / "gen.py").exists()
    assert "edits to generated code are refused" in s.sent_text(1)


async def test_exit_0_allows_and_an_unmatched_hook_does_not_run(tmp_path):
    allow = script(
        tmp_path / "hooks",
        "allow.sh",
        'cat >> "$BASTION_PROJECT_DIR/seen"; echo >> "$BASTION_PROJECT_DIR/seen"\n',
    )
    hooks = {
        "PreToolUse": [
            {"matcher": "run_command", "command": str(allow)},
            {"matcher": "edit_file", "command": "touch never"},
        ]
    }
    turns = [{"tool_calls": [command("echo hi > out.txt")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            run = await s.prompt("go")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert run.state == "completed" and (s.workspace / "out.txt").read_text() == "hi\n"
    seen = (s.workspace / "seen").read_text()
    assert len(seen.splitlines()) == 1 and not (s.workspace / "never").exists()
    assert [(r["hook_event"], r["state"], r["outcome"]) for r in rows] == [
        ("PreToolUse", "done", "ok")
    ]


async def test_a_user_hook_cannot_approve_a_call_that_would_ask(tmp_path):
    """Issue 34: a hook's answer is never an approval, the user's own included (a
    hook runs code a repository can influence); it is recorded with a line saying so."""
    approve = script(
        tmp_path / "hooks", "ok.sh",
        """echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}'\n""",
    )  # fmt: skip
    hooks = {"PreToolUse": [{"matcher": "run_command", "command": str(approve)}]}
    turns = [{"tool_calls": [command("touch made")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        # Not interactive: a call that asks is refused; the hook's "allow" changes nothing.
        s = await open_session(tmp_path, server, hooks, approval_mode="ask", interactive=False)
        try:
            await s.prompt("go")
            snap = await s.harness.store.snapshot(s.conversation_id)
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert not (s.workspace / "made").exists()
    call = snap.tool_calls[0]
    assert call.approval == "denied" and "approved_by_hook" not in (call.review or {})
    assert rows[0]["outcome"] == "approve"  # recorded as it answered
    lines = [e.text for e in snap.entries if "cannot approve" in e.text]
    assert lines and "is asked as usual" in lines[0]


async def test_without_a_hook_that_call_is_refused(tmp_path):
    """The control for the test above: the same call, no hook, is refused."""
    turns = [{"tool_calls": [command("touch made")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, None, approval_mode="ask", interactive=False)
        try:
            await s.prompt("go")
        finally:
            await s.harness.close()
    assert not (s.workspace / "made").exists()
