"""The todo list from the real `bastion -p`: emitted as a `todos.updated` line in
stream-json, printed on stderr in text mode, and still the conversation's after a
second invocation resumes it."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

pytestmark = pytest.mark.e2e

PLAN = [
    {"content": "Read the parser", "status": "done"},
    {"content": "Add the flag", "status": "in_progress"},
]
DONE = [
    {"content": "Read the parser", "status": "done"},
    {"content": "Add the flag", "status": "done"},
]


def todo_turn(items: list[dict], text: str) -> dict:
    return {
        "text": text,
        "tool_calls": [{"id": "t", "name": "todo", "arguments": {"todos": items}}],
    }


def test_stream_json_carries_the_list_and_it_survives_a_resume(loopback, bastion):
    server = loopback([
        todo_turn(PLAN, "Planning."), {"text": "Planned."},
        todo_turn(DONE, "Finishing."), {"text": "All done."},
    ])  # fmt: skip
    b = bastion(server)
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    first = b.run("-p", "add a flag", "--session-id", conv_id, "--output-format", "stream-json")
    assert first.returncode == 0, first.stderr[-2000:]
    events = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    updates = [e for e in events if e["type"] == "todos.updated"]
    assert [u["todos"] for u in updates] == [PLAN]
    assert updates[0]["conversation_id"] == conv_id and updates[0]["version"] > 0

    second = b.run("-p", "finish it", "--resume", conv_id)  # text mode: the plan on stderr
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.strip() == "All done."
    assert "plan · 2/2 done\n  ✓ Read the parser\n  ✓ Add the flag" in second.stderr
    db = sqlite3.connect(b.home / "bastion.sqlite")
    try:
        (items,) = db.execute(
            "SELECT items FROM todos WHERE conversation_id = ?", (conv_id,)
        ).fetchone()
    finally:
        db.close()
    assert json.loads(items) == DONE
    # The model was given its own list back when it was resumed (the call's result).
    last = server.requests()[-1]["messages"]
    assert any("[x] Add the flag" in str(m.get("content")) for m in last if m["role"] == "tool")
