"""`bastion attach CHILD`: a second terminal on a subagent while its parent's process
drives it. A drives the parent (`runtime.testing.drive`, approvals wait); the parent
delegates to a `writer` agent whose write asks; B, the real `bastion attach` on the
child's id, sees the child's transcript live and answers its approval; the parent then
gets the child's report."""

from __future__ import annotations

import sqlite3
import sys
import time

import pytest

from runtime.model.ids import uuid7
from tests.e2e.test_attach import Proc, procs  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e

WRITER = "---\nname: writer\ndescription: Writes files.\ntools: Read, Write\n---\nYou write.\n"


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}


TASK = {"description": "make note", "prompt": "CHILD: write note.txt", "agent": "writer"}
TURNS = [
    {"match": "PARENT", "unless": ["CHILD-REPORT"], "text": "Delegating.",
     "tool_calls": [call("task", TASK)]},
    {"match": "CHILD", "unless": ["note.txt ("], "text": "CHILD-WORKING",
     "tool_calls": [call("write_file", {"path": "note.txt", "content": "from the child"})]},
    {"match": "CHILD", "repeat": True, "text": "CHILD-REPORT: written"},
    {"match": "PARENT", "repeat": True, "text": "PARENT-DONE"},
]  # fmt: skip


def child_of(home, parent_id: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(home / "bastion.sqlite") as db:
            row = db.execute(
                "SELECT id FROM conversations WHERE task_parent_id = ?", (parent_id,)
            ).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.05)  # (poll interval)
    raise AssertionError("no child was created")


def parent_answer(home, parent_id: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(home / "bastion.sqlite") as db:
            rows = db.execute(
                "SELECT text FROM entries WHERE conversation_id = ? AND kind = 'assistant' "
                "ORDER BY position",
                (parent_id,),
            ).fetchall()
        if rows and rows[-1][0] == "PARENT-DONE":
            return "PARENT-DONE"
        time.sleep(0.05)  # (poll interval)
    raise AssertionError("the parent never answered")


def test_attach_to_a_child_follows_it_and_answers_its_approval(loopback, bastion, procs):  # noqa: F811
    server = loopback(TURNS)
    b = bastion(server)
    agents = b.home.parent / "config" / "bastion" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "writer.md").write_text(WRITER)
    parent_id = uuid7()
    a = Proc(
        [sys.executable, "-m", "runtime.testing.drive", "--session-id", parent_id,
         "--cwd", str(b.cwd), "--model", "openai/test-model", "--approval-mode", "ask",
         "--prompt", "PARENT: delegate"],
        b.env, b.cwd,
    )  # fmt: skip
    procs.append(a)
    a.wait_for("serving ")
    child_id = child_of(b.home, parent_id)
    attached = Proc(b.cmd("attach", child_id), b.env, b.cwd)
    procs.append(attached)
    attached.wait_for("live from the process driving it", "err")
    attached.wait_for("CHILD-WORKING")
    attached.wait_for("allow write_file")
    assert not (b.cwd / "note.txt").exists()
    attached.type("y")
    attached.wait_for("CHILD-REPORT: written")
    assert (b.cwd / "note.txt").read_text() == "from the child"
    assert parent_answer(b.home, parent_id) == "PARENT-DONE"
    attached.type("/quit")
    assert attached.proc.wait(10) == 0
