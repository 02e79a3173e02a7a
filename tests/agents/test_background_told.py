"""A background child that ends on its own tells its parent (issue 37 item 9; as
Claude Code's background agents do): a notice with its answer joins the parent's
running run as a steer, or starts a run when the parent is idle in an interactive
session. Not told: a child that was stopped, one the parent is waiting for, and in
print mode once the parent's run is over (nothing is left queued)."""

from __future__ import annotations

import asyncio

import pytest

from runtime.agents import children_of
from runtime.testing.server import LoopbackServer
from tests.agents.helpers import call, open_harness, start, task, until
from tests.agents.test_crash import RUNNER

pytestmark = pytest.mark.usefixtures("store_kind")

GATED = "while [ ! -e go ]; do sleep 0.05; done; echo gate-open"  # the test opens it


@pytest.fixture(autouse=True)
def runner_agent(tmp_path, monkeypatch):
    """A user agent that may run commands (the built-in one only reads)."""
    config = tmp_path / "config"
    (config / "bastion" / "agents").mkdir(parents=True)
    (config / "bastion" / "agents" / "runner.md").write_text(RUNNER)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))


def turns(parent_answer: str = "Started.") -> list[dict]:
    return [
        {"match": "PARENT", "unless": ["started background agent"],
         "tool_calls": [call("task", task("CHILD-T: wait, then report", "teller", "runner")
                             | {"background": True})]},
        {"match": "PARENT", "repeat": True, "text": parent_answer},
        {"match": "CHILD-T", "unless": ["gate-open"],
         "tool_calls": [call("run_command", {"command": GATED})]},
        {"match": "CHILD-T", "repeat": True, "text": "REPORT-T: all quiet."},
        {"match": "has finished. Its answer", "repeat": True, "text": "Noted the report."},
    ]  # fmt: skip


async def notices(harness, conv_id: str) -> list[str]:
    snap = await harness.store.snapshot(conv_id)
    return [e.text for e in snap.entries if e.kind == "user" and e.text.startswith("[background")]


async def child_of(harness, conv_id: str) -> str:
    links = await until(
        lambda: harness.store.read(lambda db: children_of(db, conv_id)), "the child started"
    )
    return links[0].conversation.id


async def test_an_idle_parent_is_told_and_takes_up_the_answer(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with LoopbackServer(turns()) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: scout", mode="full-auto")
            first = await harness.wait(item.id, conv.id)
            assert await harness.answer(first) == "Started."
            child = await child_of(harness, conv.id)
            (work / "go").touch()
            told = await until(lambda: notices(harness, conv.id), "the parent told")
            assert told == [
                f"[background agent {child} (runner: teller) has finished. Its answer:]\n"
                "REPORT-T: all quiet."
            ]
            latest = await until(
                lambda: _answered(harness, conv.id, first.id), "the parent's run on the notice"
            )
            assert await harness.answer(latest) == "Noted the report."
            assert await notices(harness, conv.id) == told  # told once
            snap = await harness.store.snapshot(conv.id)
            (entry,) = [e for e in snap.entries if e.text == told[0]]
            assert entry.data.get("from_agent") is True  # (the app sets it off as the agent's)
        finally:
            await harness.close()


async def _answered(harness, conv_id: str, before: str):
    run = await harness.store.latest_run(conv_id)
    return run if run.id != before and run.state == "completed" else None


async def test_print_mode_leaves_nothing_queued_once_the_parent_is_done(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with LoopbackServer(turns()) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(
                harness, work, "PARENT: scout", mode="full-auto", interactive=False
            )
            await harness.wait(item.id, conv.id)
            child = await child_of(harness, conv.id)
            child_run = await harness.store.latest_run(child)
            (work / "go").touch()
            ended = await harness.wait_run(child_run.id, child, poll=0.1)
            assert ended.state == "completed"
            # (the interactive twin above is told within this; nothing may come here)
            await asyncio.sleep(1.0)
            assert await notices(harness, conv.id) == []
            snap = await harness.store.snapshot(conv.id)
            assert [i for i in snap.inbox if i.state == "queued"] == []
        finally:
            await harness.close()


async def test_a_stopped_child_is_not_told(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = [
        {"match": "PARENT", "unless": ["started background agent"],
         "tool_calls": [call("task", task("CHILD-T: wait", "teller", "runner") | {"background": True})]},
        {"match": "PARENT", "unless": ["stopped"],
         "tool_calls": [call("stop_agent", {"id": "teller"})]},
        {"match": "PARENT", "repeat": True, "text": "Stopped it."},
        {"match": "CHILD-T", "repeat": True,
         "tool_calls": [call("run_command", {"command": GATED})]},
    ]  # fmt: skip
    with LoopbackServer(script) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: scout", mode="full-auto")
            run = await harness.wait(item.id, conv.id)
            assert await harness.answer(run) == "Stopped it."
            child = await child_of(harness, conv.id)
            assert (await harness.store.latest_run(child)).state == "interrupted"
            await asyncio.sleep(1.0)  # (a notice, were one sent, lands within this)
            assert await notices(harness, conv.id) == []
        finally:
            await harness.close()
