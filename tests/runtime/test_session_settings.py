"""This process's model and approval mode: read, switched mid-session, validated."""

from __future__ import annotations

import pytest

from runtime import ConfigError, Harness, SessionSettings
from runtime.harness import new_conversation
from runtime.model.errors import UnfinishedWork
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness, until_awaiting_approval

pytestmark = pytest.mark.usefixtures("store_kind")


def write_turn() -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ToolCall("c1", "write_file", '{"path": "a.txt"}')])


async def test_settings_follow_the_drive_flags_and_the_stored_ones(tmp_path):
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/stored", "approval_mode": "auto-edit"}
    )
    assert await harness.session_settings(conv.id) == SessionSettings("s/stored", "auto-edit")
    await harness.drive(conv.id, approval_mode="read-only", model="s/flag")
    assert await harness.session_settings(conv.id) == SessionSettings("s/flag", "read-only")
    await harness.close()


async def test_a_new_mode_holds_from_the_next_tool_call_of_the_running_run(tmp_path):
    toolbox = RecordingToolbox()
    provider = ScriptedProvider([write_turn(), write_turn(), ScriptedTurn(text="done")])
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="ask")
    item = await harness.submit(conv.id, "write twice")
    snap = await until_awaiting_approval(harness, conv.id)
    settings = await harness.set_approval_mode(conv.id, "auto-edit")
    assert settings.approval_mode == "auto-edit"
    await harness.respond(conv.id, snap.tool_calls[0].id, approve=True)
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    # The second write ran without asking: the mode changed under the running run.
    stored = await harness.store.snapshot(conv.id)
    assert [c.approval for c in stored.tool_calls] == ["approved", "not_required"]
    assert len(toolbox.calls) == 2
    # The mode is never stored with the conversation (it holds only where chosen).
    assert (await harness.get_conversation(conv.id)).agent.approval_mode == "ask"
    await harness.close()


async def test_an_unknown_mode_is_refused_and_nothing_changes(tmp_path):
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="ask")
    with pytest.raises(ConfigError, match="unknown approval mode 'yolo'") as caught:
        await harness.set_approval_mode(conv.id, "yolo")
    assert "full-auto" in (caught.value.hint or "")
    assert (await harness.session_settings(conv.id)).approval_mode == "ask"
    await harness.close()


async def test_set_model_validates_stores_and_answers_the_next_run(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="one"), ScriptedTurn(text="two")])

    def resolve(spec):
        if not spec.startswith("s/"):
            raise ConfigError(f"unknown provider in {spec!r}")
        return provider, spec.split("/", 1)[1]

    harness = await Harness.open(tmp_path / "bastion.sqlite", resolve_model=resolve)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/first"})
    await harness.drive(conv.id)
    await harness.wait((await harness.submit(conv.id, "a")).id, conv.id)
    with pytest.raises(ConfigError):
        await harness.set_model(conv.id, "nope/x")
    assert (await harness.session_settings(conv.id)).model == "s/first"
    assert (await harness.set_model(conv.id, "s/second")).model == "s/second"
    await harness.wait((await harness.submit(conv.id, "b")).id, conv.id)
    assert [r.model for r in provider.requests] == ["first", "second"]
    assert (await harness.get_conversation(conv.id)).agent.model == "s/second"
    await harness.close()


async def test_a_prepared_conversation_takes_the_switch_when_its_first_prompt_commits(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="hi")])
    harness = await open_harness(tmp_path, provider)
    conv = new_conversation(str(tmp_path), settings={"model": "s/first"})
    harness.prepare(conv)
    await harness.drive(conv.id, approval_mode="ask")
    await harness.set_model(conv.id, "s/chosen")
    await harness.set_approval_mode(conv.id, "full-auto")
    assert await harness.session_settings(conv.id) == SessionSettings("s/chosen", "full-auto")
    item = await harness.submit(conv.id, "hello")
    await harness.wait(item.id, conv.id)
    assert [r.model for r in provider.requests] == ["chosen"]
    assert harness.driver(conv.id).config.approval_mode == "full-auto"
    assert (await harness.get_conversation(conv.id)).agent.model == "s/chosen"
    await harness.close()


async def test_new_session_is_prepared_like_the_old_and_driven_with_the_same_settings(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="one"), ScriptedTurn(text="two")])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "instructions": "be brief"}
    )
    await harness.drive(conv.id, approval_mode="auto-edit")
    await harness.wait((await harness.submit(conv.id, "a")).id, conv.id)
    fresh = await harness.new_session(conv.id)
    assert fresh.id != conv.id and fresh.cwd == conv.cwd
    assert fresh.agent.instructions == "be brief"
    assert not await harness.store.exists(fresh.id)  # committed only with its first prompt
    assert harness.driver(conv.id) is None  # the old one's lease is released
    assert await harness.session_settings(fresh.id) == SessionSettings("s/m", "auto-edit")
    run = await harness.wait((await harness.submit(fresh.id, "b")).id, fresh.id)
    assert run.state == "completed"
    assert harness.driver(fresh.id).config.approval_mode == "auto-edit"
    assert [m.content for m in provider.requests[1].messages if m.role == "user"] == ["b"]
    await harness.close()


async def test_new_session_is_refused_while_the_old_one_has_work(tmp_path):
    harness = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="x")]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.submit(conv.id, "queued, never driven")
    with pytest.raises(UnfinishedWork, match="work in progress"):
        await harness.new_session(conv.id)
    assert len(await harness.list_conversations(None)) == 1
    await harness.close()
