"""The `task` tool end to end, in process, against the loopback model server: the
parent delegates, the child works with its own tools in its own conversation, the
parent gets the child's report as the call's result."""

from __future__ import annotations

import json

import pytest

from runtime.agents import children_of
from runtime.testing.server import LoopbackServer
from tests.agents.helpers import call, open_harness, start, task

pytestmark = pytest.mark.usefixtures("store_kind")


def parent_and_child_turns() -> list[dict]:
    return [
        {"match": "PARENT", "unless": ["REPORT-A"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD-A: what does a.txt say?"))]},
        {"match": "CHILD-A", "unless": ["\talpha"],
         "tool_calls": [call("read_file", {"path": "a.txt"})]},
        {"match": "CHILD-A", "repeat": True, "text": "REPORT-A: a.txt says alpha."},
        {"match": "PARENT", "repeat": True, "text": "The child found alpha."},
    ]  # fmt: skip


async def test_parent_gets_the_childs_report(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    with LoopbackServer(parent_and_child_turns()) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            everything = harness.subscribe()
            conv, item = await start(harness, work, "PARENT: ask a child")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            assert await harness.answer(run) == "The child found alpha."
            # The task call's live output named each tool call the child made.
            relayed = "".join(
                e.text
                for e in everything.pending()
                if type(e).__name__ == "ToolOutputDelta" and e.conversation_id == conv.id
            )
            everything.close()
            assert relayed == "read_file a.txt\n"
            calls = await harness.run_calls(run)
            assert [c.name for c in calls] == ["task"], [(c.state, c.result) for c in calls]
            assert calls[0].result is not None and calls[0].result["ok"] is True
            links = await harness.store.read(lambda db: children_of(db, conv.id))
            assert len(links) == 1 and links[0].call_id == calls[0].id
            child = links[0].conversation
            assert calls[0].process == {
                "child": child.id, "agent": "general", "description": "look around",
            }  # fmt: skip
            # The child's own transcript: the prompt, its read, its report.
            snap = await harness.store.snapshot(child.id)
            assert [e.kind for e in snap.entries] == [
                "user", "assistant", "tool_result", "assistant",
            ]  # fmt: skip
            assert snap.entries[0].text == "CHILD-A: what does a.txt say?"
            assert snap.entries[-1].text == "REPORT-A: a.txt says alpha."
            # The parent's result entry is the report; children are not top-level sessions.
            parent = await harness.store.snapshot(conv.id)
            result = [e for e in parent.entries if e.kind == "tool_result"]
            assert result[0].text == "REPORT-A: a.txt says alpha."
            listed = [c.id for c in await harness.list_conversations()]
            assert listed == [conv.id]
            assert [s.conversation.id for s in await harness.session_summaries()] == [conv.id]
            # The child's requests carried its own prompt and tools, not the parent's.
            child_bodies = [
                r.body
                for r in server.requests
                if "CHILD-A" in json.dumps(r.body["messages"][-1])
                or "CHILD-A" in json.dumps(r.body["messages"][1:2])
            ]
            tools = {t["function"]["name"] for t in child_bodies[0]["tools"]}
            assert tools == {"read_file", "list_directory", "glob", "search_files", "read_output"}
            assert "subagent" in child_bodies[0]["messages"][0]["content"]
            assert harness.driver(child.id) is None  # released once it answered
        finally:
            await harness.close()


async def test_an_agent_runs_on_its_own_cheaper_model(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    folder = tmp_path / "config" / "bastion" / "agents"
    folder.mkdir(parents=True)
    (folder / "cheap.md").write_text(
        "---\nname: cheap\ndescription: Cheap lookups.\nmodel: openai/cheap-model\n---\nBe quick."
    )
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: say hi", agent="cheap"))]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: hi"},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            models = {
                r.body["messages"][-1]["content"][:6]: r.body["model"]
                for r in server.requests
                if r.body["messages"][-1]["role"] == "user"
            }
            assert models == {"PARENT": "loopback", "CHILD:": "cheap-model"}
            body = next(r.body for r in server.requests if r.body["model"] == "cheap-model")
            assert "Be quick." in body["messages"][0]["content"]
        finally:
            await harness.close()


async def test_a_bad_task_call_is_refused_with_what_to_do(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["REFUSED"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: x", agent="nobody"), 0),
                        call("task", {"description": "no prompt"}, 1)]},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            run = await harness.wait(item.id, conv.id)
            parent = await harness.store.snapshot(conv.id)
            texts = [e.text for e in parent.entries if e.kind == "tool_result"]
            assert texts[0].startswith("REFUSED INVALID_ARGUMENT: there is no agent 'nobody'")
            assert "agents: general" in texts[0]
            assert texts[1].startswith("REFUSED INVALID_ARGUMENT: prompt is missing")
            assert run.state == "completed"
            assert await harness.store.read(lambda db: children_of(db, conv.id)) == []
        finally:
            await harness.close()
