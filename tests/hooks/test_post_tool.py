"""PostToolUse: a formatter rewrites the file after an edit, and what a hook reports
(exit 2 stderr, a JSON block reason, additionalContext) reaches the model before its
next request."""

from __future__ import annotations

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import edit, open_session, script

# A real formatter: reads the event on stdin, and for a .py file the edit named, turns
# tabs into four spaces and strips trailing blanks (rewriting the file in place).
FORMAT = r"""
path=$(python3 -c 'import json,sys; e=json.load(sys.stdin); print(e["tool_input"]["path"])')
case "$path" in *.py) ;; *) exit 0 ;; esac
python3 - "$path" <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().split("\n")
open(p, "w").write("\n".join(l.replace("\t", "    ").rstrip() for l in lines))
PY
"""


async def test_a_formatter_rewrites_the_file_after_an_edit(tmp_path):
    fmt = script(tmp_path / "hooks", "format.sh", FORMAT)
    hooks = {"PostToolUse": [{"matcher": "edit_file|write_file", "command": str(fmt)}]}
    turns = [{"tool_calls": [edit("a.py", "pass", "if x:\n\treturn 1   ")]}, {"text": "done"}]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        (s.workspace / "a.py").write_text("def f(x):\n    pass\n")
        try:
            run = await s.prompt("edit")
            rows = await s.hook_rows()
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert (s.workspace / "a.py").read_text() == "def f(x):\n    if x:\n    return 1\n"
    # started, then done: an effect hook is committed before it runs
    assert [(r["hook_event"], r["state"], r["outcome"]) for r in rows] == [
        ("PostToolUse", "started", ""),
        ("PostToolUse", "done", "ok"),
    ]
    assert notes == []  # a quiet formatter is not a transcript line


async def test_exit_2_stderr_is_told_to_the_model(tmp_path):
    lint = script(tmp_path / "hooks", "lint.sh", 'echo "a.py:2: line too long" >&2\nexit 2\n')
    hooks = {"PostToolUse": [{"matcher": "edit_file", "command": str(lint)}]}
    turns = [{"tool_calls": [edit("a.py", "pass", "return 1")]}, {"text": "done"}]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        (s.workspace / "a.py").write_text("def f():\n    pass\n")
        try:
            await s.prompt("edit")
            notes = await s.notes()
        finally:
            await s.harness.close()
    last = s.sent()[1][-1]
    assert last["role"] == "user" and "a.py:2: line too long" in last["content"]
    assert "PostToolUse hook" in last["content"] and "after edit_file" in last["content"]
    assert (s.workspace / "a.py").read_text() == "def f():\n    return 1\n"  # it had run
    assert len(notes) == 1 and "blocked: a.py:2: line too long" in notes[0]


async def test_json_reason_and_context_reach_the_model(tmp_path):
    hook = script(
        tmp_path / "hooks", "review.sh",
        """echo '{"decision": "block", "reason": "tests now fail", """
        """"hookSpecificOutput": {"additionalContext": "run pytest -x next"}}'\n""",
    )  # fmt: skip
    hooks = {"PostToolUse": [{"command": str(hook)}]}  # no matcher: every tool
    turns = [{"tool_calls": [edit("a.py", "pass", "return 1")]}, {"text": "done"}]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        (s.workspace / "a.py").write_text("def f():\n    pass\n")
        try:
            await s.prompt("edit")
        finally:
            await s.harness.close()
    told = s.sent()[1][-1]["content"]
    assert "tests now fail" in told and "run pytest -x next" in told


async def test_a_hook_on_another_tool_does_not_run(tmp_path):
    hooks = {"PostToolUse": [{"matcher": "run_command", "command": "touch ran"}]}
    turns = [{"tool_calls": [edit("a.py", "pass", "return 1")]}, {"text": "done"}]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        (s.workspace / "a.py").write_text("pass\n")
        try:
            await s.prompt("edit")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert not (s.workspace / "ran").exists() and rows == []
