"""Background subagents through the real `bastion -p`: SIGKILL while a background
child works and the parent waits for it, then resume (the child is driven again, its
command ran once, the parent's wait gets its answer); and a `-p` run whose answer is
done while a background child still runs stops it and says so.

Crash points (runtime.store.failpoints, counted in the process across parent and child):
`call.executed:2` the child's read done, its result not committed; `call.executed:3`
the child's command done (it appended to the log), its result not committed. The
parent's task call is `call.executed:1`; its wait cannot end before the child does.
"""

from __future__ import annotations

import json

import pytest

from tests.agents.test_crash import RUNNER, run_bastion, tree

pytestmark = pytest.mark.e2e

COMMAND = "echo done >> log.txt; echo appended-ok"
REPORT = "".join(f"Finding {i}: a.txt holds alpha.\n" for i in range(20)) + "REPORT-DONE"
TASK = {"description": "logger", "prompt": "CHILD: read a.txt, log once", "agent": "runner",
        "background": True}  # fmt: skip


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}


TURNS = [
    {"match": "PARENT", "unless": ["started background agent"], "repeat": True,
     "tool_calls": [call("task", TASK)]},
    {"match": "PARENT", "unless": ["of 1 ended"], "repeat": True,
     "tool_calls": [call("wait_agents", {"ids": ["logger"], "timeout": 60})]},
    {"match": "CHILD", "unless": ["\talpha"], "repeat": True,
     "tool_calls": [call("read_file", {"path": "a.txt"})]},
    {"match": "CHILD", "unless": ["appended-ok", "INTERRUPTED"], "repeat": True,
     "tool_calls": [call("run_command", {"command": COMMAND})]},
    {"match": "CHILD", "repeat": True, "text": REPORT, "chunk_size": 40, "delay_ms": 2},
    {"match": "Continue from exactly", "repeat": True, "text": "REPORT-DONE"},
    {"match": "PARENT", "repeat": True, "text": "The logger reported."},
]  # fmt: skip


def setup(loopback, bastion, turns):
    b = bastion(loopback(turns))
    (b.cwd / "a.txt").write_text("alpha\n")
    agents = b.home.parent / "config" / "bastion" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "runner.md").write_text(RUNNER)
    return b


@pytest.mark.parametrize("point", ["call.executed:2", "call.executed:3"])
def test_sigkill_while_a_background_child_works_then_resume(loopback, bastion, point):
    b = setup(loopback, bastion, TURNS)
    common = ("--approval-mode", "full-auto", "--output-format", "json")
    first = run_bastion(b, "-p", "PARENT: log in the background", *common, failpoint=point)
    assert first.returncode == -9, (point, first.returncode, first.stderr[-2000:])
    conv_id = _only_session(b.home)
    before = tree(b.home, conv_id)
    assert len(before["children"]) == 1, (point, before["children"])

    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, (point, resumed.returncode, resumed.stderr[-3000:])
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["result"] == "The logger reported.", (point, result)
    assert result["agents"] == []  # it had ended: -p stopped nothing

    after = tree(b.home, conv_id)
    (child,) = after["children"]
    assert after["children"] == before["children"]  # the same child, never a second
    kinds = [e[1] for e in after["entries"][child]]
    assert kinds.count("user") == 1, (point, kinds)  # asked once
    parent_results = [text for _, text in after["results"][conv_id]]
    assert parent_results[0].startswith(f"started background agent {child}"), parent_results
    (waited,) = [t for t in parent_results[1:] if t.startswith("1 of 1 ended")]
    assert json.loads(waited.partition("\n")[2])[0]["last_words"].endswith("REPORT-DONE")
    for conv in (conv_id, child):
        keys = [key for key, _ in after["results"][conv]]
        assert len(keys) == len(set(keys)), (point, "a call has two results")
    assert (b.cwd / "log.txt").read_text() == "done\n", point  # the command ran once


def test_print_mode_stops_a_background_child_still_running_at_its_end(loopback, bastion):
    turns = [
        {"match": "PARENT", "unless": ["started background agent"],
         "tool_calls": [call("task", TASK | {"prompt": "CHILD: work long"})]},
        {"match": "CHILD", "text": "Working", "fault": {"hang_after_chunks": 1}},
        {"match": "PARENT", "repeat": True, "text": "Left it working."},
    ]  # fmt: skip
    b = setup(loopback, bastion, turns)
    done = run_bastion(b, "-p", "PARENT: go", "--output-format", "json", failpoint=None)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["result"] == "Left it working."
    (agent,) = result["agents"]
    assert (agent["description"], agent["state"]) == ("logger", "interrupted")
    assert "stopped 1 background subagent still running when the answer was done" in done.stderr


def _only_session(home) -> str:
    import sqlite3

    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        (row,) = db.execute("SELECT id FROM conversations WHERE task_parent_id IS NULL")
        return str(row[0])
    finally:
        db.close()


TOLD_TASK = TASK | {"prompt": "CHILD: finish, then report"}
PARENT_GATE = "touch parent-waiting; while true; do sleep 0.05; done"  # cut by the kill
TOLD_TURNS = [
    {"match": "PARENT", "unless": ["started background agent"],
     "tool_calls": [call("task", TOLD_TASK)]},
    {"match": "PARENT", "unless": ["Exit", "exit", "interrupted", "INTERRUPTED"],
     "tool_calls": [call("run_command", {"command": PARENT_GATE})]},
    {"match": "CHILD", "unless": ["child-ok"], "repeat": True,
     "tool_calls": [call("run_command", {
         "command": "while [ ! -e parent-waiting ]; do sleep 0.05; done; echo child-ok"})]},
    {"match": "CHILD", "repeat": True, "text": "REPORT-TOLD"},
    {"match": "has finished. Its answer", "repeat": True, "text": "Noted the told report."},
    {"match": "PARENT", "repeat": True, "text": "Parent done."},
]  # fmt: skip


def test_a_child_that_ended_untold_is_told_once_after_a_sigkill(loopback, bastion):
    """SIGKILL between the child's answer (committed) and the notice to its parent
    (`agent.told`): the resumed parent is told once, before it goes on, and answers."""
    b = setup(loopback, bastion, TOLD_TURNS)
    common = ("--approval-mode", "full-auto", "--output-format", "json")
    first = run_bastion(b, "-p", "PARENT: report back", *common, failpoint="agent.told")
    assert first.returncode == -9, (first.returncode, first.stderr[-2000:])
    conv_id = _only_session(b.home)
    (child,) = tree(b.home, conv_id)["children"]

    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, (resumed.returncode, resumed.stderr[-3000:])
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["result"] == "Noted the told report.", result
    after = tree(b.home, conv_id)
    told = [e[3] for e in after["entries"][conv_id] if e[1] == "user" and "[background" in e[3]]
    assert told == [
        f"[background agent {child} (runner: logger) has finished. Its answer:]\nREPORT-TOLD"
    ]
