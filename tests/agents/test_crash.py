"""SIGKILL the real `bastion -p` while a subagent works, resume, and check the tree:
the child goes on from the store (its streamed partial kept), the parent gets the
child's report, and no effect runs twice.

One script drives the parent and its child (each step keyed by its conversation's
prompt, runtime.testing.server): the parent delegates to a `runner` agent (the
user's agents/*.md: Read and Bash), which reads a file, appends a line to a log
with a command, and answers at length with pauses. Steps are served while their
result is not in the request, so the same script drives every resume.

Crash points (runtime.store.failpoints, counted in the process across parent and child):
`recovered:2` the child created and admitted, its driver not yet working;
`call.executed:1` the child's read done, its result not committed;
`call.started:3` the child's command marked started, the kill before it ran (not
replay-safe: reported to the child as interrupted, never run after);
`call.executed:2` the child's command done, its result not committed;
`checkpoint.3:3` the child's answer part-streamed (its third turn);
`call.executed:3` the child answered, the parent's task result not committed.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.e2e

RUNNER = """---
name: runner
description: Reads files and runs commands.
tools: Read, Bash
---
You read and run what the task says.
"""
COMMAND = "echo done >> log.txt; echo appended-ok"
FINAL = "".join(f"Finding {i}: a.txt holds alpha and the log has one line.\n" for i in range(30))
REPORT = FINAL + "REPORT-DONE"


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}


TASK = {"description": "read and log", "prompt": "CHILD: read a.txt, log once", "agent": "runner"}
TURNS = [
    {"match": "PARENT", "unless": ["REPORT-DONE"], "text": "Delegating.",
     "tool_calls": [call("task", TASK)]},
    {"match": "CHILD", "unless": ["\talpha"], "tool_calls": [call("read_file", {"path": "a.txt"})]},
    {"match": "CHILD", "unless": ["appended-ok", "INTERRUPTED"],
     "tool_calls": [call("run_command", {"command": COMMAND})]},
    {"match": "CHILD", "repeat": True, "text": REPORT, "chunk_size": 24, "delay_ms": 4,
     "pauses": {"10": 300, "30": 300}},
    {"match": "Continue from exactly", "repeat": True, "text": "REPORT-DONE"},
    {"match": "PARENT", "repeat": True, "text": "The child reported."},
]  # fmt: skip

POINTS = [
    "recovered:2",
    "call.executed:1",
    "call.started:3",
    "call.executed:2",
    "checkpoint.3:3",
    "call.executed:3",
]


def run_bastion(b, *args: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(b.env)
    env.pop("BASTION_FAILPOINT", None)
    if failpoint:
        env["BASTION_FAILPOINT"] = failpoint
    return subprocess.run(
        b.cmd(*args), capture_output=True, text=True, cwd=b.cwd, env=env, timeout=90
    )


def tree(home, parent_id: str) -> dict:
    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        children = [
            r[0]
            for r in db.execute(
                "SELECT id FROM conversations WHERE task_parent_id = ?", (parent_id,)
            )
        ]
        out: dict = {"children": children, "entries": {}, "results": {}}
        for conv in [parent_id, *children]:
            rows = db.execute(
                "SELECT id, kind, status, text FROM entries WHERE conversation_id = ? "
                "ORDER BY position",
                (conv,),
            ).fetchall()
            entries = []
            for entry_id, kind, status, text in rows:
                chunks = db.execute(
                    "SELECT text FROM chunks WHERE owner_id = ? AND kind = 'text' ORDER BY start",
                    (entry_id,),
                ).fetchall()
                entries.append((entry_id, kind, status, text + "".join(c[0] for c in chunks)))
            out["entries"][conv] = entries
            out["results"][conv] = db.execute(
                "SELECT json_extract(data, '$.tool_call_id'), text FROM entries "
                "WHERE conversation_id = ? AND kind = 'tool_result'",
                (conv,),
            ).fetchall()
        return out
    finally:
        db.close()


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_during_a_subagent_then_resume(loopback, bastion, point):
    server = loopback(TURNS)
    b = bastion(server)
    (b.cwd / "a.txt").write_text("alpha\n")
    agents = b.home.parent / "config" / "bastion" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "runner.md").write_text(RUNNER)
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    common = ("--approval-mode", "full-auto", "--output-format", "json")

    first = run_bastion(b, "-p", "PARENT: delegate", "--session-id", conv_id, *common,
                        failpoint=point)  # fmt: skip
    assert first.returncode == -signal.SIGKILL, (point, first.returncode, first.stderr[-2000:])
    before = tree(b.home, conv_id)
    assert len(before["children"]) == 1, (point, before["children"])

    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, (point, resumed.returncode, resumed.stderr[-3000:])
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["result"] == "The child reported."

    after = tree(b.home, conv_id)
    (child,) = after["children"]
    assert after["children"] == before["children"]  # the same child, never a second
    # Nothing committed was lost, and committed text only grew.
    for conv, entries in before["entries"].items():
        now = {e[0]: e for e in after["entries"][conv]}
        for entry_id, _kind, _status, text in entries:
            assert entry_id in now, (point, "a committed entry was lost")
            assert now[entry_id][3].startswith(text), (point, "committed text changed")
    # The child was asked once; its answer reached the parent as the task's result.
    kinds = [e[1] for e in after["entries"][child]]
    assert kinds.count("user") == 1, (point, kinds)
    parent_results = [text for _, text in after["results"][conv_id]]
    cut = [e for e in after["entries"][child] if e[1] == "assistant" and e[2] == "interrupted"]
    if point.startswith("checkpoint"):  # the partial the kill cut, kept, and the rest
        assert len(cut) == 1 and cut[0][3] and REPORT.startswith(cut[0][3]), (point, cut)
        assert parent_results == [cut[0][3] + "REPORT-DONE"], (point, parent_results)
    else:
        assert parent_results == [REPORT], (point, parent_results)
    # Every call has one result; the command's effect happened exactly once.
    for conv in (conv_id, child):
        keys = [key for key, _ in after["results"][conv]]
        assert len(keys) == len(set(keys)), (point, "a call has two results")
    log = b.cwd / "log.txt"
    if point == "call.started:3":  # killed before the command ran: never run after
        assert not log.exists(), point
        assert any("INTERRUPTED" in text for _, text in after["results"][child]), point
    else:
        assert log.read_text() == "done\n", point


def test_a_resume_goes_on_with_the_child_as_started_when_its_agent_is_gone(loopback, bastion):
    """The agent file is deleted between the crash and the resume: the child goes on
    with the tools it was started with (kept with it), and the parent gets its report."""
    server = loopback(TURNS)
    b = bastion(server)
    (b.cwd / "a.txt").write_text("alpha\n")
    agents = b.home.parent / "config" / "bastion" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "runner.md").write_text(RUNNER)
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    common = ("--approval-mode", "full-auto", "--output-format", "json")
    first = run_bastion(b, "-p", "PARENT: delegate", "--session-id", conv_id, *common,
                        failpoint="call.executed:1")  # fmt: skip
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    (agents / "runner.md").unlink()
    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = tree(b.home, conv_id)
    assert len(after["children"]) == 1
    assert [text for _, text in after["results"][conv_id]] == [REPORT]
    assert (b.cwd / "log.txt").read_text() == "done\n"  # run_command, as started
