"""Session rules of the command line, end to end: a flag applies to its own invocation,
a request key is admitted once, a session is stored only with its first prompt, and
`sessions rm` removes everything of a conversation."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

pytestmark = pytest.mark.e2e


def write_call(path: str, content: str) -> dict:
    return {
        "tool_calls": [
            {"id": "call_0", "name": "write_file",
             "arguments": {"path": path, "content": content, "overwrite": True}}
        ]
    }  # fmt: skip


def conversations(home) -> list[str]:
    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        return [r[0] for r in db.execute("SELECT id FROM conversations")]
    finally:
        db.close()


def test_approval_mode_flag_applies_to_its_own_invocation(loopback, bastion):
    server = loopback(
        [write_call("one.txt", "1\n"), {"text": "wrote one"},
         write_call("two.txt", "2\n"), {"text": "could not write two"}]
    )  # fmt: skip
    b = bastion(server)
    first = b.run("-p", "write one", "--approval-mode", "full-auto")
    assert first.returncode == 0, first.stderr
    assert (b.cwd / "one.txt").read_text() == "1\n"
    second = b.run("-p", "-c", "write two")  # no flag: config, then `ask` (refused in -p)
    assert second.returncode == 3, second.stderr  # completed, with a refusal
    assert not (b.cwd / "two.txt").exists()
    assert "refused write_file" in second.stderr


def test_a_request_key_is_admitted_once_without_a_session_id(loopback, bastion):
    command = "echo line >> log.txt"
    server = loopback(
        [{"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
         {"text": "appended"}]
    )  # fmt: skip
    b = bastion(server)
    args = ("-p", "append a line", "--request-key", "k-1", "--approval-mode", "full-auto")
    first = b.json(*args, "--output-format", "json")
    again = b.json(*args, "--output-format", "json")  # a retried script
    assert first["status"] == again["status"] == "completed"
    assert (first["session_id"], first["run_id"]) == (again["session_id"], again["run_id"])
    assert (b.cwd / "log.txt").read_text() == "line\n"
    assert len(conversations(b.home)) == 1 and len(server.requests()) == 2

    other = b.run("-p", "something else", "--request-key", "k-1")
    assert other.returncode == 2
    lines = other.stderr.strip().splitlines()
    assert len(lines) == 1 and "already used for a different prompt" in lines[0]
    assert len(server.requests()) == 2


def test_no_conversation_is_stored_without_a_prompt(loopback, bastion):
    b = bastion(loopback([{"text": "hi"}]))
    quit_plain = b.run("--plain", input="")  # opens, sees end of input, leaves
    assert quit_plain.returncode == 0, quit_plain.stderr
    assert not (b.home / "bastion.sqlite").exists() or conversations(b.home) == []
    cont = b.run("-p", "-c", "continue?")
    assert cont.returncode == 2 and "no conversation in this directory" in cont.stderr
    bad = b.run("-p", "   ")
    assert bad.returncode == 2
    assert not (b.home / "bastion.sqlite").exists() or conversations(b.home) == []


def test_continue_picks_the_latest_conversation_that_has_entries(loopback, bastion):
    server = loopback([{"text": "first answer"}, {"text": "second answer"}])
    b = bastion(server)
    first = b.json("-p", "remember 42", "--output-format", "json")
    b.run("--plain", input="")  # a session opened and left empty: not continued
    again = b.json("-p", "-c", "what was it?", "--output-format", "json")
    assert again["session_id"] == first["session_id"]
    messages = server.requests()[1]["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "remember 42",
        "what was it?",
    ]


def test_sessions_rm_removes_everything_and_the_id_is_not_reused(loopback, bastion):
    command = "seq 1 20000"  # long enough to spill to an artifact
    server = loopback(
        [{"tool_calls": [{"id": "c", "name": "run_command", "arguments": {"command": command}}]},
         {"text": "counted"}, {"text": "unused"}]
    )  # fmt: skip
    b = bastion(server)
    conv_id = str(uuid.uuid4())
    done = b.json(
        "-p", "count", "--session-id", conv_id, "--approval-mode", "full-auto",
        "--output-format", "json",
    )  # fmt: skip
    assert done["status"] == "completed"
    artifacts = b.home / "artifacts" / conv_id
    assert artifacts.exists() and any(artifacts.iterdir())
    rm = b.run("sessions", "rm", conv_id)
    assert rm.returncode == 0, rm.stderr
    assert not artifacts.exists() and conversations(b.home) == []
    reuse = b.run("-p", "hello", "--session-id", conv_id)
    assert reuse.returncode == 2 and "not used again" in reuse.stderr
    assert conversations(b.home) == []
    listed = json.loads(b.run("sessions", "--json", "--all").stdout)
    assert listed == []
