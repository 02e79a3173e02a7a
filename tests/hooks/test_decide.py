"""What a hook's exit code and output decide (Claude Code's conventions)."""

from __future__ import annotations

import pytest

from runtime.hooks import HookSpec
from runtime.hooks.decide import interpret
from runtime.hooks.process import HookOutput

PRE = HookSpec("PreToolUse", "guard")
PROMPT = HookSpec("UserPromptSubmit", "ctx")


def out(code: int | None = 0, stdout: bytes = b"", stderr: bytes = b"", **kw) -> HookOutput:
    return HookOutput(code, stdout, stderr, **kw)


@pytest.mark.parametrize(
    ("output", "decision", "reason"),
    [
        (out(0), "", ""),
        (out(2, stderr=b"not on main\n"), "block", "not on main"),
        (out(2), "block", "blocked by PreToolUse hook `guard` (it gave no reason on stderr)"),
        (out(0, b'{"decision": "block", "reason": "no"}'), "block", "no"),
        (out(0, b'{"decision": "approve", "reason": "fine"}'), "approve", "fine"),
        (out(0, b'{"hookSpecificOutput": {"permissionDecision": "deny", '
                b'"permissionDecisionReason": "nope"}}'), "block", "nope"),
        (out(0, b'{"hookSpecificOutput": {"permissionDecision": "allow"}}'), "approve", ""),
        (out(0, b'{"hookSpecificOutput": {"permissionDecision": "ask"}}'), "", ""),
        (out(0, b'  {"suppressOutput": true}\n'), "", ""),
    ],
)  # fmt: skip
def test_decisions(output, decision, reason):
    result = interpret(PRE, output)
    assert (result.decision, result.reason) == (decision, reason)


@pytest.mark.parametrize(
    ("output", "outcome", "says"),
    [
        (out(1, stderr=b"boom\nmore"), "failed", "failed (exit 1): boom"),
        (out(None, timed_out=True), "timeout", "ran past its 60 s limit"),
        (out(None, error="it could not be started (ENOENT)"), "failed", "could not be started"),
        (out(0, b"x" * 10, stdout_over=True), "garbage", "more than 256 KiB"),
        (out(0, b"\xff\xfe"), "garbage", "not UTF-8"),
        (out(0, b"Formatted 3 files"), "garbage", "other than a JSON object"),
        (out(0, b"[1, 2]"), "garbage", "other than a JSON object"),
        (out(0, b'{"decision": "yes"}'), "garbage", 'wrong "decision"'),
        (out(0, b'{"decision": "block", "reason": 3}'), "garbage", 'wrong "decision"'),
    ],
)
def test_a_failed_guard_blocks_and_another_events_failure_decides_nothing(output, outcome, says):
    """Issue 37 item 2: a PreToolUse hook that fails blocks its call (fail closed),
    saying so and how to opt out; with fail_open, and on any other event, a failure
    is one line and no decision."""
    from msgspec.structs import replace

    result = interpret(PRE, output)
    assert result.outcome == outcome and result.decision == "block"
    assert says in result.line and "\n" not in result.line
    assert "the call is blocked" in result.line and "fail_open = true" in result.reason
    for spec in (replace(PRE, fail_open=True), replace(PRE, event="PostToolUse")):
        result = interpret(spec, output)
        assert result.outcome == outcome and result.decision == ""
        assert says in result.line and "no decision" in result.line


def test_plain_stdout_is_context_for_prompt_and_session_hooks():
    result = interpret(PROMPT, out(0, b"The branch is main.\n"))
    assert (result.outcome, result.context, result.line) == ("ok", "The branch is main.", "")
    json_context = out(0, b'{"hookSpecificOutput": {"additionalContext": "ctx"}}')
    assert interpret(PROMPT, json_context).context == "ctx"
