"""Background subagents end to end, in process, against the loopback model server:
`task {background: true}` returns the child's id at once and the parent goes on;
`wait_agents` brings the child's answer, `message_agent` steers it, `stop_agent`
stops it; every bad input gets one line and changes nothing."""

from __future__ import annotations

import json

import pytest

from runtime.agents import children_of
from runtime.testing.server import LoopbackServer
from tests.agents.helpers import call, open_harness, start, task

pytestmark = pytest.mark.usefixtures("store_kind")

HANG = {"hang_after_chunks": 1}  # a child that streams a little and then works on


def background(prompt: str, description: str) -> dict:
    return task(prompt, description) | {"background": True}


async def results(harness, conv_id: str) -> list[str]:
    snap = await harness.store.snapshot(conv_id)
    return [e.text for e in snap.entries if e.kind == "tool_result"]


async def test_the_parent_goes_on_and_gets_the_answer_when_it_waits(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    turns = [
        {"match": "PARENT", "text": "Starting a scout.",
         "tool_calls": [call("task", background("CHILD-B: what does a.txt say?", "scout"))]},
        {"match": "CHILD-B", "unless": ["\talpha"],
         "tool_calls": [call("read_file", {"path": "a.txt"})]},
        {"match": "CHILD-B", "repeat": True, "text": "REPORT-B: alpha.", "delay_ms": 300},
        {"match": "PARENT", "tool_calls": [call("wait_agents", {"ids": ["scout"], "timeout": 60})]},
        {"match": "PARENT", "repeat": True, "text": "The scout found alpha."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: scout around")
            run = await harness.wait(item.id, conv.id)
            assert await harness.answer(run) == "The scout found alpha."
            started, waited = await results(harness, conv.id)
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            child = link.conversation.id
            assert started.startswith(f"started background agent {child} (general: scout)")
            assert waited.startswith("1 of 1 ended\n")
            (report,) = json.loads(waited.partition("\n")[2])
            assert report["state"] == "completed" and report["last_words"] == "REPORT-B: alpha."
            # The task call returned while the child still worked: it ended later.
            parent = await harness.store.snapshot(conv.id)
            first_result = next(e for e in parent.entries if e.kind == "tool_result")
            child_view = await harness.store.snapshot(child)
            assert first_result.created_at < child_view.entries[-1].created_at
            (record,) = await harness.agents(conv.id)
            assert (record.id, record.state, record.description) == (child, "completed", "scout")
            assert record.output_tokens > 0  # its spend
        finally:
            await harness.close()


async def test_message_stop_and_every_bad_input_get_one_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "tool_calls": [call("task", background("CHILD-S: work long", "sleeper"))]},
        {"match": "CHILD-S", "text": "Working", "fault": HANG},
        {"match": "PARENT", "tool_calls": [call("message_agent", {"id": "sleeper", "text": "MSG-1"})]},
        {"match": "PARENT", "tool_calls": [call("stop_agent", {"id": "sleeper"})]},
        {"match": "PARENT", "tool_calls": [call("stop_agent", {"id": "sleeper"})]},
        {"match": "PARENT", "tool_calls": [call("message_agent", {"id": "sleeper", "text": "MSG-2"})]},
        {"match": "PARENT", "tool_calls": [call("wait_agents", {"ids": ["nobody"]})]},
        {"match": "PARENT", "tool_calls": [call("wait_agents", {"ids": ["sleeper"], "timeout": 5})]},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            child = link.conversation.id
            _, sent, stopped, again, late, unknown, waited = await results(harness, conv.id)
            assert sent == f"delivered to {child}"
            assert stopped == f"stopped {child}; its work so far is kept"
            assert again.startswith(f"REFUSED ENDED: agent {child} was not running (interrupted)")
            assert late.startswith(f"REFUSED ENDED: agent {child} has ended (interrupted)")
            assert unknown.startswith("REFUSED NOT_FOUND: nobody is not a background agent")
            assert waited.startswith("1 of 1 ended\n")
            # The message was admitted once (a steer, durable); the late one never.
            snap = await harness.store.snapshot(child)
            texts = [i.text for i in snap.inbox]
            assert texts.count("MSG-1") == 1 and "MSG-2" not in texts
            assert (await harness.store.latest_run(child)).state == "interrupted"
        finally:
            await harness.close()


async def test_another_sessions_agent_and_a_grandchild_are_refused(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT-A", "tool_calls": [call("task", background("CHILD-A: spawn", "mine"))]},
        {"match": "CHILD-A", "unless": ["REFUSED"],
         "tool_calls": [call("task", background("GRANDCHILD: x", "deeper"), 0),
                        call("list_agents", {}, 1)]},
        {"match": "CHILD-A", "repeat": True, "text": "CHILD-A done"},
        {"match": "PARENT-A", "tool_calls": [call("wait_agents", {"ids": ["mine"]})]},
        {"match": "PARENT-A", "repeat": True, "text": "A done"},
        {"match": "PARENT-B", "tool_calls": [call("stop_agent", {"id": "mine"})]},
        {"match": "PARENT-B", "repeat": True, "text": "B done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            a, item = await start(harness, work, "PARENT-A: go")
            await harness.wait(item.id, a.id)
            (link,) = await harness.store.read(lambda db: children_of(db, a.id))
            spawned, listed, _ = [*await results(harness, link.conversation.id), ""][:3]
            assert spawned.startswith(
                "REFUSED FORBIDDEN: this subagent (general) was not given task"
            )
            assert listed.startswith("REFUSED FORBIDDEN: this subagent (general) was not given")
            assert await harness.store.read(lambda db: children_of(db, link.conversation.id)) == []
            b, item = await start(harness, work, "PARENT-B: go")
            await harness.wait(item.id, b.id)
            (refused,) = await results(harness, b.id)
            assert refused.startswith("REFUSED NOT_FOUND: mine is not a background agent")
            # Nor by its id, from the user's side of the other session.
            with __import__("pytest").raises(Exception, match="no such agent in this session"):
                await harness.stop_agent(b.id, link.conversation.id)
            assert (await harness.store.latest_run(link.conversation.id)).state == "completed"
        finally:
            await harness.close()


async def test_the_user_lists_and_stops_a_background_agent_in_the_app(tmp_path):
    from tests.tui.conftest import SIZE, app_over, wait_for
    from tests.tui.test_slash import run_command, said

    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "tool_calls": [call("task", background("CHILD-S: work long", "sleeper"))]},
        {"match": "CHILD-S", "text": "Working", "fault": HANG},
        {"match": "PARENT", "repeat": True, "text": "Left it working."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        conv, item = await start(harness, work, "PARENT: go")
        await harness.wait(item.id, conv.id)
        app = app_over(harness, conv.id)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(app.ready.is_set, pilot)
                await run_command(app, pilot, "/agents")
                await wait_for(lambda: "background agents" in said(app), pilot)
                assert "general: sleeper running" in said(app), said(app)
                await run_command(app, pilot, "/agents stop sleeper")
                await wait_for(lambda: "sleeper: interrupted" in said(app), pilot)
                await run_command(app, pilot, "/agents stop nobody")
                await wait_for(lambda: "no such agent in this session: nobody" in said(app), pilot)
                (record,) = await harness.agents(conv.id)
                assert record.state == "interrupted"
        finally:
            await harness.close()


async def test_a_message_replayed_after_a_crash_is_delivered_once(tmp_path):
    """A message_agent call run again (its result was not committed when the process
    died) finds the message its first run admitted under the call's key: one steer."""
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "tool_calls": [call("task", background("CHILD-S: work long", "sleeper"))]},
        {"match": "CHILD-S", "text": "Working", "fault": HANG},
        {"match": "PARENT", "repeat": True, "text": "Left it working."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            await harness.wait(item.id, conv.id)
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            toolbox = harness.driver(conv.id).config.toolbox
            first = await toolbox.agents.message(link, "MSG", "agent-message:call-1")
            again = await toolbox.agents.message(link, "MSG", "agent-message:call-1")
            assert first.ok and again.ok and first.data["item"] == again.data["item"]
            inbox = (await harness.store.snapshot(link.conversation.id)).inbox
            assert [i.text for i in inbox].count("MSG") == 1
            await harness.stop_agent(conv.id, "sleeper")
            # Ended: a replay still finds its own message; a new one is refused.
            replay = await toolbox.agents.message(link, "MSG", "agent-message:call-1")
            late = await toolbox.agents.message(link, "MSG", "agent-message:call-2")
            assert replay.ok and replay.data["item"] == first.data["item"]
            assert not late.ok and late.model_text.startswith("REFUSED ENDED")
        finally:
            await harness.close()
