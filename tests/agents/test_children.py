"""Subagents side by side, their tools, their approvals and their interrupts, in
process against the loopback model server."""

from __future__ import annotations

import json

import pytest

from runtime.agents import children_of
from runtime.model.views import child_label, reduce
from runtime.testing.server import LoopbackServer
from tests.agents.helpers import call, open_harness, start, task, until

pytestmark = pytest.mark.usefixtures("store_kind")

WRITER = """---
name: writer
description: Writes files it is told to write.
tools: Read, Write
---
You write files.
"""


def first_user(body: dict) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    return users[0]["content"] if users else ""


async def test_two_children_run_at_once(tmp_path):
    """Both children of one turn start before either answers: child B's first request
    comes while child A is still pausing in the middle of its first answer."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")
    (work / "b.txt").write_text("beta\n")
    turns = [
        {"match": "PARENT", "unless": ["REPORT-A"], "text": "Two at once.",
         "tool_calls": [call("task", task("CHILD-A: read a.txt"), 0),
                        call("task", task("CHILD-B: read b.txt"), 1)]},
        {"match": "CHILD-A", "unless": ["\talpha"], "text": "Reading a. " * 8,
         "chunk_size": 8, "pauses": {"3": 600},
         "tool_calls": [call("read_file", {"path": "a.txt"})]},
        {"match": "CHILD-A", "repeat": True, "text": "REPORT-A: alpha"},
        {"match": "CHILD-B", "unless": ["\tbeta"],
         "tool_calls": [call("read_file", {"path": "b.txt"})]},
        {"match": "CHILD-B", "repeat": True, "text": "REPORT-B: beta"},
        {"match": "PARENT", "repeat": True, "text": "Both reported."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: two children")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            calls = await harness.run_calls(run)
            results = [c.result for c in calls]
            assert [r and r["ok"] for r in results] == [True, True]
            parent = await harness.store.snapshot(conv.id)
            texts = [e.text for e in parent.entries if e.kind == "tool_result"]
            assert texts == ["REPORT-A: alpha", "REPORT-B: beta"]  # in the order asked
            firsts = [first_user(r.body) for r in server.requests]
            a_answers = [i for i, f in enumerate(firsts) if f.startswith("CHILD-A")]
            b_first = firsts.index("CHILD-B: read b.txt")
            assert b_first < a_answers[-1]  # B started before A's last request
            links = await harness.store.read(lambda db: children_of(db, conv.id))
            assert [link.conversation.title for link in links] == [
                "general: look around",
                "general: look around",
            ]
        finally:
            await harness.close()


async def test_read_only_child_is_refused_a_write(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: write x.txt"))]},
        {"match": "CHILD", "unless": ["REFUSED"],
         "tool_calls": [call("write_file", {"path": "x.txt", "content": "x\n"})]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: I may not write."},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            # full-auto for the parent: the child still has only the read-only tools
            conv, item = await start(harness, work, "PARENT: go", mode="full-auto")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            assert not (work / "x.txt").exists()
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            child = await harness.store.snapshot(link.conversation.id)
            (refused,) = [e for e in child.entries if e.kind == "tool_result"]
            assert refused.text.startswith("REFUSED FORBIDDEN: this subagent (general)")
            assert child.tool_calls[0].approval == "not_required"  # refused, never asked
        finally:
            await harness.close()


async def test_a_childs_approval_is_asked_and_answered_from_the_parent(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    agents = tmp_path / "config" / "bastion" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.md").write_text(WRITER)
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: write x.txt", "make x", agent="writer"))]},
        {"match": "CHILD", "unless": ["x.txt ("],
         "tool_calls": [call("write_file", {"path": "x.txt", "content": "x\n"})]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: written."},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go", mode="ask")
            sub = harness.subscribe(conv.id)

            async def asking():  # (the child starts a moment before its task call names it)
                view = await harness.snapshot(conv.id)
                named = view.child_calls and child_label(view, view.child_calls[0]) != "subagent"
                return view if named else None

            view = await until(asking, "the child's approval, named, in the parent's view")
            (asked,) = view.child_calls
            assert asked.name == "write_file" and asked.conversation_id != conv.id
            assert child_label(view, asked) == "writer (make x)"
            assert not (work / "x.txt").exists()
            # The parent's own events carry the child's call too: the reducer keeps it.
            heard = [e for e in sub.pending() if e.conversation_id == asked.conversation_id]
            assert heard and all(type(e).__name__ == "ToolCallUpdated" for e in heard)
            await harness.respond(conv.id, asked.id, True)  # answered as the parent
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            assert (work / "x.txt").read_text() == "x\n"
            after = await harness.snapshot(conv.id)
            assert after.child_calls == ()
            for event in sub.pending():
                view = reduce(view, event)
            assert view.child_calls == ()  # the answer's event removed it
            sub.close()
        finally:
            await harness.close()


async def test_interrupting_the_parent_interrupts_its_child(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["INTERRUPTED"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: think long"))]},
        {"match": "CHILD", "repeat": True, "text": "thinking " * 200, "chunk_size": 4,
         "delay_ms": 20},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")

            async def child_streaming():
                links = await harness.store.read(lambda db: children_of(db, conv.id))
                if not links:
                    return None
                snap = await harness.store.snapshot(links[0].conversation.id)
                streamed = [e for e in snap.entries if e.kind == "assistant" and len(e.text) > 8]
                return links[0] if streamed else None

            link = await until(child_streaming, "the child streams")
            await harness.interrupt(conv.id)
            run = await harness.wait(item.id, conv.id)
            assert run.state == "interrupted"
            child_run = await harness.store.latest_run(link.conversation.id)
            assert child_run is not None
            await until(lambda: _terminal(harness, link.conversation.id), "the child's run ends")
            child_run = await harness.store.latest_run(link.conversation.id)
            assert child_run.state == "interrupted"
            snap = await harness.store.snapshot(link.conversation.id)
            partial = [e for e in snap.entries if e.kind == "assistant"]
            assert partial[-1].status == "interrupted" and partial[-1].text.startswith("thinking")
        finally:
            await harness.close()


async def _terminal(harness, conversation_id):
    run = await harness.store.latest_run(conversation_id)
    return run is not None and run.terminal


async def test_export_and_delete_take_the_children(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: say hi"))]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: hi"},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            await harness.wait(item.id, conv.id)
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            doc = await harness.export(conv.id)
            (child_doc,) = doc["children"]
            assert child_doc["conversation"]["id"] == link.conversation.id
            assert child_doc["task_call_id"] == link.call_id
            assert child_doc["entries"][-1]["text"] == "REPORT: hi"
            json.dumps(doc)  # JSON-able whole
            # An import takes the parent's document (children are left out, not refused).
            imported = await harness.import_conversation(json.dumps(doc), cwd=str(work))
            assert await harness.store.read(lambda db: children_of(db, imported.id)) == []
            hits = await harness.search("hi")  # (a child's text is its parent's hit)
            found = {h.conversation.id for h in hits}
            assert conv.id in found and link.conversation.id not in found
            await harness.release(conv.id)
            await harness.delete_conversation(conv.id)
            assert not await harness.exists(link.conversation.id)
            assert await harness.was_deleted(link.conversation.id)
        finally:
            await harness.close()


async def test_a_fork_copies_the_children_of_the_calls_it_copies(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: say hi", "greet"))]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: hi"},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            await harness.wait(item.id, conv.id)
            (link,) = await harness.store.read(lambda db: children_of(db, conv.id))
            fork = await harness.fork(conv.id)
            (copy,) = await harness.store.read(lambda db: children_of(db, fork.id))
            assert copy.conversation.id != link.conversation.id
            assert copy.conversation.parent_id == link.conversation.id  # forked from it
            view = await harness.snapshot(fork.id)
            (task_call,) = view.tool_calls
            assert copy.call_id == task_call.id
            assert task_call.process["child"] == copy.conversation.id
            assert copy.conversation.settings["subagent"]["parent"] == fork.id
            child = await harness.store.snapshot(copy.conversation.id)
            assert [e.text for e in child.entries] == ["CHILD: say hi", "REPORT: hi"]
            assert [c.id for c in await harness.list_conversations()] == [fork.id, conv.id]
            # The source is untouched; a fork taken before the task call has no child.
            assert (await harness.store.read(lambda db: children_of(db, conv.id))) == [link]
            first = (await harness.store.snapshot(conv.id)).entries[0]
            early = await harness.fork(conv.id, first.id)
            assert await harness.store.read(lambda db: children_of(db, early.id)) == []
        finally:
            await harness.close()
