"""Project instructions: which AGENTS.md / CLAUDE.md files, in what order, within the cap,
and what reaches the provider (Anthropic with its cache breakpoints)."""

from __future__ import annotations

import os
from pathlib import Path

from runtime import Harness
from runtime.context.instructions import INSTRUCTIONS_LIMIT, instruction_paths, load_instructions
from runtime.providers.anthropic import AnthropicProvider
from runtime.run.deps import LoopSettings
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox


def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """repo/.git, repo/AGENTS.md, repo/pkg/CLAUDE.md, repo/pkg/sub (the workspace)."""
    repo = tmp_path / "repo"
    workspace = repo / "pkg" / "sub"
    workspace.mkdir(parents=True)
    (repo / ".git").mkdir()
    return repo, repo / "pkg", workspace


def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}


def user_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config" / "bastion" / "AGENTS.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_order_is_user_then_root_to_workspace_nearest_last(tmp_path):
    repo, pkg, workspace = tree(tmp_path)
    (tmp_path / "AGENTS.md").write_text("above the repository: never read")
    (repo / "AGENTS.md").write_text("root rules")
    (pkg / "CLAUDE.md").write_text("pkg rules (claude)")
    (workspace / "AGENTS.md").write_text("workspace rules")
    user = user_file(tmp_path, "my own rules")
    found = load_instructions(workspace, env(tmp_path))
    assert [f.path for f in found.files] == [
        str(user),
        str(repo / "AGENTS.md"),
        str(pkg / "CLAUDE.md"),
        str(workspace / "AGENTS.md"),
    ]
    text = found.text
    positions = [text.index(s) for s in ("my own", "root rules", "pkg rules", "workspace rules")]
    assert positions == sorted(positions)
    assert "never read" not in text
    assert not found.cut


def test_agents_md_wins_over_claude_md_in_the_same_folder(tmp_path):
    repo, _, workspace = tree(tmp_path)
    (repo / "AGENTS.md").write_text("agents")
    (repo / "CLAUDE.md").write_text("claude")
    (workspace / "CLAUDE.md").write_text("claude only here")
    paths = instruction_paths(workspace, env(tmp_path))
    assert paths == [repo / "AGENTS.md", workspace / "CLAUDE.md"]
    text = load_instructions(workspace, env(tmp_path)).text
    assert "agents" in text and "claude only here" in text and "\nclaude\n" not in text


def test_without_a_repository_only_the_workspace_is_read(tmp_path):
    workspace = tmp_path / "a" / "b"
    workspace.mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("parent")
    (workspace / "AGENTS.md").write_text("here")
    assert instruction_paths(workspace, env(tmp_path)) == [workspace / "AGENTS.md"]


def test_a_git_file_marks_the_root_too(tmp_path):
    repo, _, workspace = tree(tmp_path)
    (repo / ".git").rmdir()
    (repo / ".git").write_text("gitdir: /elsewhere")  # a worktree or submodule
    (repo / "AGENTS.md").write_text("root")
    assert instruction_paths(workspace, env(tmp_path)) == [repo / "AGENTS.md"]


def test_cap_keeps_the_nearest_whole_and_cuts_the_next_with_a_note(tmp_path):
    repo, _, workspace = tree(tmp_path)
    user_file(tmp_path, "far away\n" * 100)
    (repo / "AGENTS.md").write_text("é" * 20_000)  # 40,000 bytes
    (workspace / "AGENTS.md").write_text("near " * 2000)  # 10,000 bytes
    found = load_instructions(workspace, env(tmp_path))
    user, root, near = found.files
    assert (near.used, near.size, near.cut) == (10_000, 10_000, False)
    left = INSTRUCTIONS_LIMIT - 10_000
    assert root.size == 40_000 and root.cut and root.used == left  # even: é is 2 bytes
    assert (user.used, user.cut) == (0, True)
    text = found.text
    assert "é" * (left // 2) in text and "é" * (left // 2 + 1) not in text
    assert f"was cut here: {left:,} of its 40,000 bytes fit in the 32 KiB cap" in text
    assert f"[{user.path} (900 bytes) was left out" in text
    assert "far away" not in text
    assert len(text.encode()) < INSTRUCTIONS_LIMIT + 1000  # the cap plus notes and headings
    assert "over the cap" in found.describe()


def test_cut_never_splits_a_character(tmp_path):
    _, _, workspace = tree(tmp_path)
    (workspace / "AGENTS.md").write_text("é" * 10)
    found = load_instructions(workspace, env(tmp_path), limit=5)
    assert found.files[0].used == 4
    assert "From" in found.text and "éé\n" in found.text and "\ufffd" not in found.text


def test_an_unreadable_file_is_listed_with_its_error(tmp_path):
    _, _, workspace = tree(tmp_path)
    path = workspace / "AGENTS.md"
    path.write_text("secret")
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # running as root: permissions do not apply
            return
        found = load_instructions(workspace, env(tmp_path))
    finally:
        path.chmod(0o644)
    assert found.files[0].error and found.text == ""
    assert "not read" in found.describe()


def test_no_files(tmp_path):
    found = load_instructions(tmp_path, env(tmp_path))
    assert found.files == () and found.text == ""
    assert found.describe() == "no AGENTS.md or CLAUDE.md found"


async def test_anthropic_request_has_instructions_and_cache_breakpoints(tmp_path, monkeypatch):
    repo, _, workspace = tree(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    user_file(tmp_path, "Answer in English.")
    (repo / "AGENTS.md").write_text("Run `make test` before you finish.")
    async with LoopbackServer([{"text": "noted"}]) as server:
        provider = AnthropicProvider("anthropic", server.url)
        harness = await Harness.open(
            tmp_path / "bastion.sqlite",
            resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
            toolbox_factory=lambda conv: RecordingToolbox(),
            loop_settings=LoopSettings(checkpoint_interval=0.02),
        )
        try:
            conv = await harness.create_conversation(
                str(workspace),
                settings={"model": "anthropic/claude-sonnet-4", "instructions": "Be brief."},
            )
            await harness.drive(conv.id)
            item = await harness.submit(conv.id, "hi")
            run = await harness.wait(item.id, conv.id)
            assert run.state == "completed"
            listed = await harness.project_instructions(str(workspace))
        finally:
            await harness.close()
            await provider.aclose()
    body = server.requests[0].body
    (system,) = body["system"]
    assert system["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in body["tools"][:-1])
    prompt = system["text"]
    order = ["Workspace root:", "Answer in English.", "make test", "Be brief.", "Today:"]
    positions = [prompt.index(s) for s in order]
    assert positions == sorted(positions)
    assert [Path(f.path).name for f in listed.files] == ["AGENTS.md", "AGENTS.md"]
