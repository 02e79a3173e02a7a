"""What the ledger keeps across a stop: a gate that decided is not asked again, an
effect hook that a stop cut off is reported and not run again, and a gate that a stop
cut off before it decided runs again (at least once until decided)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import Session, alive, command, open_session
from tests.runtime.helpers import until_awaiting_approval

pytestmark = pytest.mark.usefixtures("store_kind")

TURNS = [{"tool_calls": [command("echo ran >> out.txt")]}, {"text": "done"}]


def count(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def wait_for(path: Path) -> None:
    """Until `path` holds a whole line: the shell creates the file (`>>`) before it
    writes, and a hook killed in between would leave it empty."""
    for _ in range(3000):  # up to 30 s: the machine may be busy
        if path.exists() and path.read_text().endswith("\n"):
            return
        await asyncio.sleep(0.01)  # (poll interval)
    raise AssertionError(f"{path} never appeared")


async def test_decided_gates_are_not_run_again_after_a_restart(tmp_path):
    hooks = {
        "UserPromptSubmit": [{"command": "echo prompt >> gates.log"}],
        "PreToolUse": [{"command": "echo pre >> gates.log"}],
    }
    async with LoopbackServer(TURNS) as server:
        a = await open_session(tmp_path, server, hooks, approval_mode="ask")
        item = await a.harness.submit(a.conversation_id, "go")
        snap = await until_awaiting_approval(a.harness, a.conversation_id)
        await a.harness.close()  # as a crash would leave it: the call awaits its answer
        assert count(a.workspace / "gates.log") == ["prompt", "pre"]

        b = await open_session(
            tmp_path, server, hooks, approval_mode="ask", conversation_id=a.conversation_id
        )
        try:
            rows = await b.hook_rows()
            await b.harness.respond(b.conversation_id, snap.tool_calls[0].id, True)
            run = await b.harness.wait(item.id, b.conversation_id, poll=0.05)
        finally:
            await b.harness.close()
    assert [(r["hook_event"], r["state"]) for r in rows] == [
        ("UserPromptSubmit", "done"), ("PreToolUse", "done"),
    ]  # fmt: skip
    assert run.state == "completed" and count(b.workspace / "out.txt") == ["ran"]
    assert count(b.workspace / "gates.log") == ["prompt", "pre"]  # neither ran again


async def stopped_during_hook(tmp_path: Path, hooks: dict, marker: str) -> tuple[Session, str]:
    """A session whose hook (it writes `marker` in the workspace, then sleeps) is
    running when the process stops."""
    server = LoopbackServer(TURNS)
    await server.__aenter__()
    a = await open_session(tmp_path, server, hooks)
    item = await a.harness.submit(a.conversation_id, "go")
    await wait_for(a.workspace / marker)
    await a.harness.close()
    return a, item.id


async def test_an_effect_hook_cut_off_is_reported_and_not_run_again(tmp_path):
    hooks = {"PostToolUse": [{"command": "echo $$ > hook.pid; echo post >> post.log; sleep 30"}]}
    a, item_id = await stopped_during_hook(tmp_path, hooks, "post.log")
    assert not alive(a.workspace / "hook.pid")  # killed as bastion stopped
    try:
        b = await open_session(tmp_path, a.server, hooks, conversation_id=a.conversation_id)
        try:
            run = await b.harness.wait(item_id, b.conversation_id, poll=0.05)
            notes = await b.notes()
            rows = await b.hook_rows()
        finally:
            await b.harness.close()
    finally:
        await a.server.__aexit__(None, None, None)
    assert run.state == "completed"
    assert count(b.workspace / "post.log") == ["post"]  # at most once: not run again
    assert count(b.workspace / "out.txt") == ["ran"]
    assert len(notes) == 1 and "was cut off when bastion stopped; it is not run again" in notes[0]
    assert [r["state"] for r in rows] == ["started", "interrupted"]


async def test_a_gate_cut_off_before_deciding_runs_again(tmp_path):
    slow_once = (
        "if [ -f pre.log ]; then echo again >> pre.log; exit 0; fi; echo first >> pre.log; sleep 30"
    )
    hooks = {"PreToolUse": [{"command": slow_once}]}
    a, item_id = await stopped_during_hook(tmp_path, hooks, "pre.log")
    try:
        assert not (a.workspace / "out.txt").exists()
        b = await open_session(tmp_path, a.server, hooks, conversation_id=a.conversation_id)
        try:
            run = await b.harness.wait(item_id, b.conversation_id, poll=0.05)
        finally:
            await b.harness.close()
    finally:
        await a.server.__aexit__(None, None, None)
    assert run.state == "completed"
    assert count(b.workspace / "pre.log") == ["first", "again"]
    assert count(b.workspace / "out.txt") == ["ran"]


async def test_an_effect_hook_an_interrupt_cuts_off_is_one_line_at_once(tmp_path):
    hooks = {"PostToolUse": [{"command": "echo $$ > hook.pid; sleep 30"}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            item = await s.harness.submit(s.conversation_id, "go")
            await wait_for(s.workspace / "hook.pid")
            await s.harness.interrupt(s.conversation_id)
            run = await s.harness.wait(item.id, s.conversation_id, poll=0.05)
            notes = await s.notes()
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert run.state == "interrupted"
    assert not alive(s.workspace / "hook.pid")
    assert [r["state"] for r in rows] == ["started", "interrupted"]
    assert len(notes) == 1 and "was cut off by an interrupt; it is not run again" in notes[0]


async def test_a_stop_hook_cut_off_by_a_stop_is_reported_and_not_run_again(tmp_path):
    """Issue 37 item 3: the Stop hook too (it runs when the model has answered, before
    the run is committed as answered): on resume one line says it was cut off, it is
    not run again, and the run ends answered."""
    hooks = {"Stop": [{"command": "echo $$ > hook.pid; echo stop >> stop.log; sleep 30"}]}
    a, item_id = await stopped_during_hook(tmp_path, hooks, "stop.log")
    assert not alive(a.workspace / "hook.pid")
    try:
        b = await open_session(tmp_path, a.server, hooks, conversation_id=a.conversation_id)
        try:
            run = await b.harness.wait(item_id, b.conversation_id, poll=0.05)
            notes = await b.notes()
            rows = await b.hook_rows()
        finally:
            await b.harness.close()
    finally:
        await a.server.__aexit__(None, None, None)
    assert run.state == "completed", run.error
    assert count(b.workspace / "stop.log") == ["stop"]  # at most once
    assert any("Stop hook" in n and "cut off" in n for n in notes), notes
    assert [r["state"] for r in rows if r["hook_event"] == "Stop"] == ["started", "interrupted"]
