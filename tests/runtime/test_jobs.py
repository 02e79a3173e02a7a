"""Background jobs through the harness (issue 39): the model starts one, reads on in a
later turn, stops it; each start and end is a committed record; a closing driver
ends what still runs and tells the model; `/jobs`' ops list and stop."""

from __future__ import annotations

import json
import sys

import pytest

from runtime.model.errors import UnknownJob
from runtime.model.llm import ToolCall
from runtime.run.toolbox import WorkspaceToolbox
from runtime.store.jobs import jobs_of
from runtime.testing.pids import running
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux processes")

SERVER = (
    "import os, time\n"
    "open('me.pid', 'w').write(str(os.getpid()))\n"
    "print('ready', flush=True)\n"
    "time.sleep(1.5)\n"  # (after run_command has returned with its first output)
    "print('serving', flush=True)\n"
    "time.sleep(60)\n"  # then serves until stopped
)
# The job under test: prints once, then runs until it is stopped.
READY = "import time; print('ready', flush=True); time.sleep(60)"


def call(i: int, name: str, **arguments: object) -> ToolCall:
    return ToolCall(f"call_{i}", name, json.dumps(arguments))


async def start(tmp_path, turns):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "serve.py").write_text(SERVER)
    provider = ScriptedProvider(turns)
    toolbox = WorkspaceToolbox(str(root), tmp_path / "artifacts")
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(root), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id, interactive=True)
    return harness, conv, provider, toolbox, root


def told(provider: ScriptedProvider, request: int) -> list[str]:
    """The tool results the model was sent in its `request`-th request."""
    return [str(m.content) for m in provider.requests[request].messages if m.role == "tool"]


async def test_start_read_on_in_a_later_turn_and_stop(tmp_path):
    turns = [
        ScriptedTurn(
            tool_calls=(call(1, "run_command", argv=["python3", "-c", READY], background=True),)
        ),
        ScriptedTurn(text="it is up"),
        ScriptedTurn(
            tool_calls=(call(2, "run_command", argv=["python3", "serve.py"], background=True),)
        ),
        ScriptedTurn(tool_calls=(call(3, "read_output", id="job_2", wait=20),)),
        ScriptedTurn(tool_calls=(call(4, "stop_job", id="job_2"), call(5, "stop_job", id="job_1"))),
        ScriptedTurn(text="stopped"),
    ]
    harness, conv, provider, toolbox, root = await start(tmp_path, turns)
    try:
        first = await harness.submit(conv.id, "start it")
        assert (await harness.wait(first.id, conv.id)).state == "completed"
        [started] = told(provider, 1)
        assert "background job job_1: running" in started and "\nready" in started
        jobs = await harness.jobs(conv.id)
        assert [(j.id, j.state) for j in jobs] == [("job_1", "running")]
        assert jobs[0].tool_call_id and jobs[0].process and jobs[0].output_id
        assert jobs[0].last_line() == "ready"
        second = await harness.submit(conv.id, "the other one, then stop both")
        assert (await harness.wait(second.id, conv.id)).state == "completed"
        assert "ready" in told(provider, 3)[-1]
        pid = int((root / "me.pid").read_text())
        read = told(provider, 4)[-1]
        assert read.startswith("serving\n") and "job_2 (`python3 serve.py`): running" in read
        stop_2, stop_1 = told(provider, 5)[-2:]
        assert "job_2 (`python3 serve.py`): stopped (by the model)" in stop_2
        assert "serving" in stop_2 and "job_1" in stop_1
        assert not running(pid, root)
        rows = await harness.store.read(lambda db: jobs_of(db, conv.id))
        assert [(r.id, r.state, r.end_reason) for r in rows] == [
            ("job_1", "stopped", "by the model"), ("job_2", "stopped", "by the model"),
        ]  # fmt: skip
        assert rows[1].last_output.endswith("serving\n") and rows[1].exit_code == -15
        events = [e for e in await harness.ledger(conv.id) if e.type == "job.updated"]
        seen = [(e.job.id, e.job.state) for e in events]  # type: ignore[attr-defined]
        assert seen[:2] == [("job_1", "running"), ("job_2", "running")]
        assert sorted(seen[2:]) == [("job_1", "stopped"), ("job_2", "stopped")]  # (together)
    finally:
        await harness.close()
    assert toolbox.jobs.running() == []


async def test_a_closing_driver_ends_its_jobs_and_tells_the_model(tmp_path):
    turns = [
        ScriptedTurn(
            tool_calls=(call(1, "run_command", argv=["python3", "serve.py"], background=True),)
        ),
        ScriptedTurn(text="up"),
    ]
    harness, conv, _provider, _toolbox, root = await start(tmp_path, turns)
    item = await harness.submit(conv.id, "start it")
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    pid = int((await until(lambda: (root / "me.pid").exists() and root / "me.pid")).read_text())
    assert running(pid, root)
    await harness.close()
    assert not running(pid, root)
    again = await open_harness(tmp_path, ScriptedProvider([]))
    try:
        [job] = await again.jobs(conv.id)
        assert job.state == "stopped" and job.end_reason == "bastion closed the session"
        snap = await again.store.snapshot(conv.id)
        [note] = [e for e in snap.entries if e.kind == "note"]
        assert "job_1 (`python3 serve.py`) was stopped: bastion closed the session" in note.text
        assert "its last output:\nready" in note.data["for_model"]
        with pytest.raises(UnknownJob):  # (this process does not drive it)
            await again.stop_job(conv.id, "1")
    finally:
        await again.close()


async def test_the_user_stops_a_job_and_a_second_stop_changes_nothing(tmp_path):
    turns = [
        ScriptedTurn(
            tool_calls=(call(1, "run_command", argv=["python3", "serve.py"], background=True),)
        ),
        ScriptedTurn(text="up"),
    ]
    harness, conv, _provider, _toolbox, root = await start(tmp_path, turns)
    try:
        item = await harness.submit(conv.id, "start it")
        assert (await harness.wait(item.id, conv.id)).state == "completed"
        pid = int((root / "me.pid").read_text())
        stopped = await harness.stop_job(conv.id, "1")
        assert stopped.state == "stopped" and stopped.end_reason == "by the user"
        assert not running(pid, root)
        assert (await harness.stop_job(conv.id, "job_1")) == stopped
        with pytest.raises(UnknownJob):
            await harness.stop_job(conv.id, "7")
    finally:
        await harness.close()
    snap = await harness_snapshot(tmp_path, conv.id)
    [note] = [e for e in snap.entries if e.kind == "note"]  # the stop's; none at close
    assert note.text == "background job job_1 (`python3 serve.py`) was stopped: by the user"
    assert "its last output:\nready" in note.data["for_model"]


async def harness_snapshot(tmp_path, conversation_id):
    again = await open_harness(tmp_path, ScriptedProvider([]))
    try:
        return await again.store.snapshot(conversation_id)
    finally:
        await again.close()
