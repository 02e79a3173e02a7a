"""The `todo` tool (runtime.plan): the model's checklist is stored with the conversation,
reaches every view through the reducer, survives a restart and compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime import Harness
from runtime.model.events import TodosUpdated, event_from_dict, event_to_dict
from runtime.model.llm import ToolCall
from runtime.model.protocol import view_from_wire, view_to_wire
from runtime.model.todo import TodoItem, plan_text
from runtime.model.views import reduce
from runtime.plan.todo import PlanToolbox, parse_todos, todo_spec
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox

PLAN = [
    {"content": "Read the parser", "status": "done"},
    {"content": "Add the --json flag", "status": "in_progress"},
    {"content": "Write the test", "status": "pending"},
]


def todo(call_id: str, items: Any) -> ToolCall:
    return ToolCall(call_id, "todo", json.dumps({"todos": items}))


async def open_at(path: Path, provider: Any, summariser: Any = None, **config: Any) -> Harness:
    def resolve(spec: str) -> tuple[Any, str]:
        chosen = summariser if spec.startswith("sum/") else provider
        return chosen, spec.split("/", 1)[1]

    return await Harness.open(
        path / "bastion.sqlite",
        resolve_model=resolve,
        toolbox_factory=lambda conv: RecordingToolbox(),
        loop_settings=LoopSettings(checkpoint_interval=0.02),
        config=Config(**config),
    )


async def ask(harness: Harness, conv_id: str, text: str) -> Any:
    item = await harness.submit(conv_id, text)
    return await harness.wait(item.id, conv_id)


async def test_the_list_is_stored_shown_and_read_back(tmp_path):
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(todo("t1", PLAN),)),
        ScriptedTurn(text="Planned."),
    ])  # fmt: skip
    harness = await open_at(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="read-only")  # todo runs in every mode
    sub = harness.subscribe(conv.id)
    view = await harness.snapshot(conv.id)
    assert view.todos == ()
    run = await ask(harness, conv.id, "add a flag")
    assert run.state == "completed"
    assert "todo" in [t.name for t in provider.requests[0].tools]
    reply = next(m for m in provider.requests[1].messages if m.role == "tool")
    assert "[x] Read the parser\n[~] Add the --json flag\n[ ] Write the test" in str(reply.content)
    async for event in sub:  # the front end's view gets it through the reducer
        view = reduce(view, event)
        if isinstance(event, TodosUpdated):
            break
    sub.close()
    expected = tuple(TodoItem.from_dict(d) for d in PLAN)
    assert view.todos == expected
    await harness.close()

    reopened = await open_at(tmp_path, ScriptedProvider([]))  # as after a restart
    assert (await reopened.snapshot(conv.id)).todos == expected
    assert view_from_wire(view_to_wire(view)).todos == expected  # the app's child process
    # Issue 40: the plan is in the export, both kinds.
    document = await reopened.export(conv.id)
    assert document["todos"] == PLAN
    from runtime.harness.transfer import export_markdown

    text = export_markdown(await reopened.snapshot(conv.id))
    assert "## Todo list\n\n- [x] Read the parser\n- [~] Add the --json flag\n" in text
    await reopened.close()


async def test_a_bad_list_is_refused_and_the_old_one_stays(tmp_path):
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(todo("t1", PLAN),)),
        ScriptedTurn(tool_calls=(todo("t2", [{"content": "x", "status": "maybe"}]),)),
        ScriptedTurn(text="ok"),
    ])  # fmt: skip
    harness = await open_at(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="ask")
    assert (await ask(harness, conv.id, "plan")).state == "completed"
    reply = [m for m in provider.requests[2].messages if m.role == "tool"][-1]
    assert "REFUSED INVALID_ARGUMENT" in str(reply.content) and "'maybe'" in str(reply.content)
    view = await harness.snapshot(conv.id)
    assert [t.content for t in view.todos] == [d["content"] for d in PLAN]
    await harness.close()


async def test_two_lists_in_one_turn_land_in_the_asked_order(tmp_path):
    first, second = PLAN[:1], [{"content": "Only this", "status": "pending"}]
    read = ToolCall("r1", "read_file", json.dumps({"path": "a"}))
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(todo("t1", first), read, todo("t2", second))),
        ScriptedTurn(text="ok"),
    ])  # fmt: skip
    harness = await open_at(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="ask")
    assert (await ask(harness, conv.id, "plan")).state == "completed"
    assert [t.content for t in (await harness.snapshot(conv.id)).todos] == ["Only this"]
    await harness.close()


async def test_compaction_keeps_the_plan_for_the_model(tmp_path):
    provider = ScriptedProvider([
        ScriptedTurn(text="Planning.", tool_calls=(todo("t1", PLAN),)),
        ScriptedTurn(text="First step done."),
        ScriptedTurn(text="Second answer."),
        ScriptedTurn(text="Third answer."),
    ])  # fmt: skip
    summariser = ScriptedProvider([ScriptedTurn(text="SUMMARY: a flag is being added.")])
    harness = await open_at(tmp_path, provider, summariser, compact_model="sum/small")
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id, approval_mode="full-auto")
    await ask(harness, conv.id, "add a flag")
    await ask(harness, conv.id, "and then?")
    summary = await harness.compact(conv.id)
    assert summary is not None
    assert summary.text.startswith("SUMMARY: a flag is being added.")
    assert summary.text.endswith(plan_text([TodoItem.from_dict(d) for d in PLAN]))
    await ask(harness, conv.id, "go on")
    messages = provider.requests[-1].messages
    sent = [str(m.content) for m in messages]
    calls = [c.name for m in messages for c in m.tool_calls]
    assert "todo" not in calls and "Planning." not in sent  # that turn was summarised away
    assert any("[~] Add the --json flag" in text for text in sent)  # its plan was not
    assert len((await harness.snapshot(conv.id)).todos) == 3
    await harness.close()


def test_the_event_round_trips_and_the_arguments_are_checked():
    event = TodosUpdated("c", 4, PLAN)
    assert event_from_dict(event_to_dict(event)) == event
    assert parse_todos(json.dumps({"todos": [{"content": "  a\n b ", "status": "done"}]})) == (
        TodoItem("a b", "done"),
    )
    sneaky = {"todos": [{"content": "\x1b]52;c;cm0gLXJm\x07step\x1b[2J", "status": "pending"}]}
    assert parse_todos(json.dumps(sneaky)) == (TodoItem("]52;c;cm0gLXJmstep[2J", "pending"),)
    for bad in ("[]", '{"todos": {}}', '{"todos": [{"status": "done"}]}', "{"):
        try:
            parse_todos(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")
    box = PlanToolbox(RecordingToolbox())
    assert [s.name for s in box.specs()][-1] == "todo" == todo_spec().name
    info = box.info("todo")
    assert info is not None and info.read_only and not info.concurrent
    assert box.info("write_file") == RecordingToolbox().info("write_file")


async def test_a_fork_takes_the_plan_as_it_stood_where_it_forks(tmp_path):
    later = [{**PLAN[0]}, {**PLAN[1], "status": "done"}, {**PLAN[2], "status": "in_progress"}]
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(todo("t1", PLAN),)), ScriptedTurn(text="Planned."),
        ScriptedTurn(tool_calls=(todo("t2", later),)), ScriptedTurn(text="Flag added."),
    ])  # fmt: skip
    harness = await open_at(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="ask")
    await ask(harness, conv.id, "plan it")
    await ask(harness, conv.id, "go on")
    whole = await harness.fork(conv.id)
    assert [t.status for t in (await harness.snapshot(whole.id)).todos] == [
        "done", "done", "in_progress",
    ]  # fmt: skip
    second_prompt = [e for e in (await harness.snapshot(conv.id)).entries if e.kind == "user"][1]
    early = await harness.fork(conv.id, second_prompt.id)  # before the second list
    assert [t.status for t in (await harness.snapshot(early.id)).todos] == [
        "done", "in_progress", "pending",
    ]  # fmt: skip
    await harness.close()
