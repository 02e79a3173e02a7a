"""The real `bastion -p` with hooks in the user's config: a PreToolUse block is one
line on stderr and the model gets the reason; a formatter rewrites the edited file;
print mode, which cannot ask, still refuses a call a hook "approves" (a hook's answer is
never an approval, issue 34)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

CONFIG = """
[[hooks.PreToolUse]]
matcher = "run_command"
command = "grep -q 'git push' && { echo 'pushing is for humans' >&2; exit 2; }; exit 0"

[[hooks.PreToolUse]]
matcher = "run_command"
command = "echo '{\\"decision\\": \\"approve\\"}'"

[[hooks.PostToolUse]]
matcher = "edit_file"
command = "tr a-z A-Z < notes.txt > notes.tmp && mv notes.tmp notes.txt"
"""


def test_print_mode_runs_the_users_hooks(loopback, bastion, tmp_path):
    turns = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "git push"}}]},
        {"tool_calls": [{"id": "c2", "name": "edit_file", "arguments": {
            "path": "notes.txt", "old_text": "draft", "new_text": "final"}}]},
        {"tool_calls": [{"id": "c3", "name": "run_command", "arguments": {
            "command": "touch made"}}]},
        {"text": "done"},
    ]  # fmt: skip
    server = loopback(turns)
    b = bastion(server)
    config = tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG)
    (b.cwd / "notes.txt").write_text("a draft\n")
    out = b.run("-p", "ship it", "--output-format", "json", "--approval-mode", "auto-edit")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed", out.stderr
    assert "bastion: PreToolUse hook `" in out.stderr and "pushing is for humans" in out.stderr
    told = [m for m in server.requests()[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "pushing is for humans" in told
    # auto-edit ran the edit, and the formatter after it
    assert (b.cwd / "notes.txt").read_text() == "A FINAL\n"
    # the command would ask (print mode: refused); the hook's approve changed nothing
    assert out.returncode == 3 and not (b.cwd / "made").exists()
    assert "a hook cannot approve a call" in out.stderr
