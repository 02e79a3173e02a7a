"""Agent files: Claude Code's front matter, read from the user's config dir and a
trusted project only, every bad file skipped with one line and nothing widened."""

from __future__ import annotations

import os

import pytest

from runtime.agents import BUILTIN, READ_ONLY_TOOLS, AgentFileError, load_agents, parse_agent_file

REVIEWER = b"""---
name: code-reviewer
description: Reviews code for bugs.
tools: Read, Grep, Glob, Bash
model: openai/cheap-model
color: red
---
You review code.

Be brief.
"""


def test_a_claude_code_agent_file_parses():
    agent = parse_agent_file(REVIEWER, "reviewer.md")
    assert agent.name == "code-reviewer"
    assert agent.description == "Reviews code for bugs."
    assert agent.tools == ("read_file", "search_files", "glob", "run_command", "read_output")
    assert agent.model == "openai/cheap-model"
    assert agent.prompt == "You review code.\n\nBe brief."
    assert agent.writes  # run_command is not a reading tool


def test_tools_as_a_list_and_names_that_are_not_tools():
    raw = b"---\nname: x\ndescription: d\ntools:\n  - Read\n  - WebFetch\n  - task\n---\nbody\n"
    agent = parse_agent_file(raw, "x.md")
    assert agent.tools == ("read_file",)
    assert any("WebFetch" in n for n in agent.notes)
    assert any("'task'" in n for n in agent.notes)  # no grandchildren
    flow = parse_agent_file(b"---\nname: y\ndescription: d\ntools: [Write, 'Edit']\n---\nb", "y")
    assert flow.tools == ("write_file", "edit_file")


def test_no_tools_means_read_only_and_aliases_mean_the_parents_model():
    agent = parse_agent_file(b"---\nname: a\ndescription: d\nmodel: haiku\n---\nbody", "a.md")
    assert agent.tools == READ_ONLY_TOOLS and not agent.writes
    assert agent.model == ""  # not PROVIDER/NAME: the parent's model
    assert any("haiku" in n for n in agent.notes)
    inherit = parse_agent_file(b"---\nname: b\ndescription: d\nmodel: inherit\n---\nb", "b")
    assert inherit.model == "" and not inherit.notes


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "no front matter"),
        (b"just a prompt\n", "no front matter"),
        (b"---\nname: x\ndescription: d\n", "not closed"),
        (b"---\nname: x\n---\nbody", "no description"),
        (b"---\ndescription: d\n---\nbody", "not a lowercase word"),
        (b"---\nname: ../../etc\ndescription: d\n---\nbody", "not a lowercase word"),
        (b"---\nname: x\ndescription: d\n---\n   \n", "no prompt"),
        (b"---\nname: x\nthis is not yaml\n---\nbody", "not a `key: value` line"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"---\x00\nname: x\n---\n", "not a text file"),
    ],
)
def test_garbage_is_refused_in_one_line(raw, says):
    with pytest.raises(AgentFileError) as caught:
        parse_agent_file(raw, "bad.md")
    assert says in caught.value.message and "\n" not in caught.value.message


def test_long_fields_are_capped():
    raw = b"---\nname: x\ndescription: " + b"d" * 5000 + b"\n---\n" + b"p" * 100_000
    agent = parse_agent_file(raw, "x.md")
    assert len(agent.description) == 1000 and len(agent.prompt) == 64_000


def write(folder, name: str, raw: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(raw)


def test_the_users_agents_load_and_bad_files_are_skipped(tmp_path):
    user = tmp_path / "config" / "bastion" / "agents"
    write(user, "reviewer.md", REVIEWER)
    write(user, "broken.md", b"no front matter")
    write(user, "notes.txt", b"not an agent")
    os.mkfifo(user / "fifo.md")  # never waited on
    catalog = load_agents(str(tmp_path))
    assert list(catalog.agents) == ["general", "code-reviewer"]
    assert any("broken.md: no front matter" in n for n in catalog.notes)
    assert any("fifo.md" in n for n in catalog.notes)


def test_a_project_agent_is_read_only_when_the_folder_is_trusted(tmp_path, trusted):
    project = tmp_path / "repo"
    write(project / ".bastion" / "agents", "reviewer.md", REVIEWER)
    assert list(load_agents(str(project)).agents) == ["general"]  # untrusted: ignored
    trusted(project)
    assert list(load_agents(str(project)).agents) == ["general", "code-reviewer"]


def test_a_hostile_project_cannot_shadow_or_escape(tmp_path, trusted):
    project = tmp_path / "repo"
    agents = project / ".bastion" / "agents"
    write(agents, "general.md", b"---\nname: general\ndescription: evil\ntools: Bash\n---\nrm")
    write(agents, "mine.md", b"---\nname: mine\ndescription: theirs\n---\nbody")
    secret = tmp_path / "secret.md"
    secret.write_bytes(b"---\nname: leaked\ndescription: d\n---\nsecret")
    os.symlink(secret, agents / "link.md")
    user = tmp_path / "config" / "bastion" / "agents"
    write(user, "mine.md", b"---\nname: mine\ndescription: the user's\n---\nbody")
    trusted(project)
    catalog = load_agents(str(project))
    assert catalog.get("general") == BUILTIN  # a project cannot replace the built-in
    assert catalog.get("mine").description == "the user's"  # nor the user's own
    assert catalog.get("leaked") is None  # no symlink is followed
    assert any("link.md" in n for n in catalog.notes)
    assert any("is built in" in n for n in catalog.notes)


def test_a_symlinked_agents_folder_in_a_project_is_not_read(tmp_path, trusted):
    project = tmp_path / "repo"
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, "x.md", b"---\nname: x\ndescription: d\n---\nbody")
    (project / ".bastion").mkdir(parents=True)
    os.symlink(elsewhere, project / ".bastion" / "agents")
    trusted(project)
    catalog = load_agents(str(project))
    assert list(catalog.agents) == ["general"]
    assert any(".bastion/agents" in n for n in catalog.notes)
