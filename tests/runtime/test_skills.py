"""Issue 40: skills (Claude Code's SKILL.md format). The model is offered the skills by
description in the `skill` tool and reads one's instructions by calling it; a
project's skills only in a trusted folder, read pinned and capped."""

from __future__ import annotations

import json
import os

import pytest

from runtime import TrustState, set_trust
from runtime.model.llm import ToolCall
from runtime.setup.skills import MAX_SKILL_BYTES, load_skills
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness

NOTES = "---\nname: release-notes\ndescription: Write release notes from the commits\n---\n" \
        "List the commits since the last tag, then group them by kind."  # fmt: skip


@pytest.fixture
def places(tmp_path, monkeypatch):
    config = tmp_path / "config"
    user = config / "bastion" / "skills"
    (user / "release-notes").mkdir(parents=True)
    (user / "release-notes" / "SKILL.md").write_text(NOTES)
    project = tmp_path / "repo"
    (project / ".bastion" / "skills" / "deploy").mkdir(parents=True)
    (project / ".bastion" / "skills" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the site\n---\nRun make deploy."
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return user, project


def test_skills_are_listed_by_description_and_a_projects_only_after_trust(places, tmp_path):
    _, project = places
    (project / ".bastion" / "skills" / "big").mkdir()
    (project / ".bastion" / "skills" / "big" / "SKILL.md").write_text(
        "---\ndescription: big\n---\n" + "x" * MAX_SKILL_BYTES
    )
    (project / ".bastion" / "skills" / "nodesc").mkdir()
    (project / ".bastion" / "skills" / "nodesc" / "SKILL.md").write_text("just text")
    skills, _ = load_skills(str(project), False, os.environ)
    assert [s.name for s in skills] == ["release-notes"]
    skills, notes = load_skills(str(project), True, os.environ)
    assert [s.name for s in skills] == ["release-notes", "deploy"]
    assert any("64 KiB" in n for n in notes) and any("no description" in n for n in notes)


async def test_the_model_is_offered_the_skills_and_loads_one(places, tmp_path):
    _, project = places
    set_trust(str(project), TrustState.TRUSTED)
    load = ToolCall("s1", "skill", json.dumps({"name": "release-notes"}))
    wrong = ToolCall("s2", "skill", json.dumps({"name": "nope"}))
    provider = ScriptedProvider([ScriptedTurn(tool_calls=(load, wrong)), ScriptedTurn(text="ok")])
    harness = await open_harness(tmp_path, provider, RecordingToolbox())
    conv = await harness.create_conversation(str(project), settings={"model": "s/m"})
    await harness.drive(conv.id, approval_mode="read-only")  # (reading a skill changes nothing)
    try:
        item = await harness.submit(conv.id, "write the release notes")
        await harness.wait(item.id, conv.id)
        (spec,) = [t for t in provider.requests[0].tools if t.name == "skill"]
        assert "- release-notes: Write release notes from the commits" in spec.description
        assert "- deploy: Deploy the site" in spec.description
        results = [m.content for m in provider.requests[1].messages if m.role == "tool"]
        assert "List the commits since the last tag" in str(results[0])
        assert "no skill 'nope'" in str(results[1])
    finally:
        await harness.close()


async def test_without_skills_there_is_no_skill_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    provider = ScriptedProvider([ScriptedTurn(text="hi")])
    harness = await open_harness(tmp_path, provider, RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    try:
        item = await harness.submit(conv.id, "hello")
        await harness.wait(item.id, conv.id)
        assert "skill" not in [t.name for t in provider.requests[0].tools]
    finally:
        await harness.close()
