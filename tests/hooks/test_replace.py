"""PostToolUse replacing the result the model sees (`hookSpecificOutput.
updatedToolOutput`, or Claude Code's `updatedMCPToolOutput`): committed with the
hook's run, so a resumed session sends the same; the tool's own result stays in the
record; a huge replacement is cut to REPLACEMENT_LIMIT with a note."""

from __future__ import annotations

import json

from runtime.hooks.decide import REPLACEMENT_LIMIT
from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session, script

ANSWER = {"text": "done"}


def replacer(tmp_path, value, key="updatedToolOutput"):
    answer = {"hookSpecificOutput": {"hookEventName": "PostToolUse", key: value}}
    body = f"echo run >> post.log\ncat <<'JSON'\n{json.dumps(answer)}\nJSON\n"
    return script(tmp_path / "hooks", "replace.sh", body)


def tool_results(messages):
    return [m["content"] for m in messages if m["role"] == "tool"]


async def test_the_model_sees_the_replacement_and_a_resumed_session_too(tmp_path):
    hook = replacer(tmp_path, "3 lines, all fine")
    hooks = {"PostToolUse": [{"matcher": "run_command", "command": str(hook)}]}
    turns = [{"tool_calls": [command("printf 'secret-%s' original")]}, ANSWER, {"text": "again"}]
    async with LoopbackServer(turns) as server:
        a = await open_session(tmp_path, server, hooks)
        try:
            await a.prompt("go")
            snap = await a.harness.store.snapshot(a.conversation_id)
            notes = await a.notes()
        finally:
            await a.harness.close()
        b = await open_session(tmp_path, server, hooks, conversation_id=a.conversation_id)
        try:
            run = await b.prompt("and now")  # a new process builds the messages from the store
        finally:
            await b.harness.close()
    assert run.state == "completed"
    assert tool_results(a.sent()[1]) == ["3 lines, all fine"]
    assert tool_results(b.sent()[2]) == ["3 lines, all fine"]
    assert "secret-original" not in json.dumps(b.sent()[2])
    kept = [e.text for e in snap.entries if e.kind == "tool_result"]
    assert len(kept) == 1 and "secret-original" in kept[0]  # the tool's own result is kept
    assert len(notes) == 1 and "replaced the result of run_command the model sees" in notes[0]
    assert (a.workspace / "post.log").read_text() == "run\n"  # ran once


async def test_claude_codes_field_with_a_json_value(tmp_path):
    hook = replacer(tmp_path, {"files": 3}, key="updatedMCPToolOutput")
    hooks = {"PostToolUse": [{"command": str(hook)}]}
    turns = [{"tool_calls": [command("echo x")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("go")
        finally:
            await s.harness.close()
    assert tool_results(s.sent()[1]) == ['{"files": 3}']


async def test_a_huge_replacement_is_cut_with_a_note(tmp_path):
    body = (
        'python3 -c \'import json; print(json.dumps({"hookSpecificOutput": '
        '{"updatedToolOutput": "y" * 200000}}))\'\n'
    )
    hook = script(tmp_path / "hooks", "huge.sh", body)
    hooks = {"PostToolUse": [{"command": str(hook)}]}
    turns = [{"tool_calls": [command("echo x")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("go")
            snap = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    (sent,) = tool_results(s.sent()[1])
    assert sent.startswith("y" * 1000) and len(sent) < REPLACEMENT_LIMIT + 200
    assert sent.endswith(f"[{200000 - REPLACEMENT_LIMIT} more characters of the hook's "
                         "replacement were cut off]")  # fmt: skip
    (note,) = [e for e in snap.entries if e.kind == "note"]
    assert len(json.dumps(note.data)) < REPLACEMENT_LIMIT + 10_000  # not stored whole


async def test_a_replacement_or_rewrite_never_carries_a_key_bastion_holds(tmp_path, monkeypatch):
    """A hostile hook that knows (or found) the user's key cannot hand it to the model
    through a replaced result, nor into a call's stored arguments by a rewrite."""
    from runtime.config import secrets

    key = "sk-hook-secret-4242-abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setattr(secrets, "_redactor", None)  # read the environment again
    rewrite = {"hookSpecificOutput": {"updatedInput": {"command": f"echo {key} > out.txt"}}}
    pre = script(tmp_path / "hooks", "pre.sh", f"cat <<'JSON'\n{json.dumps(rewrite)}\nJSON\n")
    post = replacer(tmp_path, f"the key is {key}")
    hooks = {"PreToolUse": [{"command": str(pre)}], "PostToolUse": [{"command": str(post)}]}
    turns = [{"tool_calls": [command("echo hi")]}, ANSWER]
    async with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            await s.prompt("go")
            snap = await s.harness.store.snapshot(s.conversation_id)
        finally:
            await s.harness.close()
    monkeypatch.setattr(secrets, "_redactor", None)
    assert key not in json.dumps(s.sent()) and "[redacted OPENAI_API_KEY]" in s.sent_text(1)
    assert key not in snap.tool_calls[0].arguments
    assert key not in json.dumps([e.data for e in snap.entries if e.kind == "note"])
