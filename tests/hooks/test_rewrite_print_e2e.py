"""The real `bastion -p` with a PreToolUse hook that rewrites a call and a PostToolUse
hook that replaces its result: the rewritten command runs, and the model is told of
the rewrite and sees the replacement instead of the command's output."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

CONFIG = """
[[hooks.PreToolUse]]
matcher = "run_command"
command = '''echo '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "echo rewritten > out.txt; echo noisy-output"}}}' '''

[[hooks.PostToolUse]]
matcher = "run_command"
command = '''echo '{"hookSpecificOutput": {"updatedToolOutput": "trimmed by the hook"}}' '''
"""


def test_print_mode_rewrites_the_call_and_replaces_its_result(loopback, bastion, tmp_path):
    turns = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {
            "command": "touch original"}}]},
        {"text": "done"},
    ]  # fmt: skip
    server = loopback(turns)
    b = bastion(server)
    config = tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG)
    out = b.run("-p", "go", "--output-format", "json", "--approval-mode", "full-auto")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed", out.stderr
    assert (b.cwd / "out.txt").read_text() == "rewritten\n"
    assert not (b.cwd / "original").exists()
    (told,) = [m for m in server.requests()[1]["messages"] if m["role"] == "tool"]
    first, rest = told["content"].split("\n", 1)
    assert first.startswith("[a PreToolUse hook (") and "echo rewritten > out.txt" in first
    assert rest == "trimmed by the hook"  # the command printed noisy-output
