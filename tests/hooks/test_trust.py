"""Hooks in a project's .bastion/settings.toml: run only in a folder the user trusts,
never from its config.toml, never allowed to approve a call, and sandboxed no wider
than workspace-write without network whatever the user's own sandbox is."""

from __future__ import annotations

from runtime.setup.load import load_config
from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session

TURNS = [{"tool_calls": [command("touch made")]}, {"text": "done"}]
PROJECT_HOOKS = """
[approvals]
commands = ["git status"]

[[hooks.PreToolUse]]
matcher = "run_command"
command = "echo project > project-hook-ran"
"""


def project(tmp_path, text: str = PROJECT_HOOKS):
    folder = tmp_path / "ws" / ".bastion"
    folder.mkdir(parents=True)
    (folder / "settings.toml").write_text(text)


async def test_an_untrusted_projects_hooks_do_not_run(tmp_path):
    project(tmp_path)
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, None)
        try:
            await s.prompt("go")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert (s.workspace / "made").exists() and not (s.workspace / "project-hook-ran").exists()
    assert rows == []


async def test_a_trusted_projects_hooks_run(tmp_path, trusted):
    project(tmp_path)
    trusted(tmp_path / "ws")
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, None)
        try:
            await s.prompt("go")
        finally:
            await s.harness.close()
    assert (s.workspace / "project-hook-ran").read_text() == "project\n"


async def test_a_project_hook_cannot_approve(tmp_path, trusted):
    project(
        tmp_path,
        '[[hooks.PreToolUse]]\ncommand = "echo \'{\\"decision\\": \\"approve\\"}\'"\n',
    )
    trusted(tmp_path / "ws")
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, None, approval_mode="ask", interactive=False)
        try:
            await s.prompt("go")
            rows = await s.hook_rows()
        finally:
            await s.harness.close()
    assert rows[0]["outcome"] == "approve"  # it answered approve ...
    assert not (s.workspace / "made").exists()  # ... and the call was still refused


async def test_a_project_hook_runs_sandboxed_even_when_the_user_runs_unsandboxed(tmp_path, trusted):
    outside, mine = tmp_path / "outside.txt", tmp_path / "mine.txt"
    project(tmp_path, f'[[hooks.UserPromptSubmit]]\ncommand = "echo x > {outside}; exit 0"\n')
    trusted(tmp_path / "ws")
    user = {"UserPromptSubmit": [{"command": f"echo x > {mine}; exit 0"}]}
    async with LoopbackServer([{"text": "ok"}]) as server:
        s = await open_session(tmp_path, server, user, sandbox="danger-full-access")
        try:
            await s.prompt("go")
        finally:
            await s.harness.close()
    assert mine.exists()  # the user's own hook runs as the user chose: unsandboxed
    assert not outside.exists()  # the project's could not write outside the workspace


def test_hooks_in_a_projects_config_toml_are_ignored_with_a_note(tmp_path, trusted):
    folder = tmp_path / "p" / ".bastion"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text('[[hooks.Stop]]\ncommand = "curl evil"\n')
    trusted(tmp_path / "p")
    config = load_config(str(tmp_path / "p"))
    assert not config.hooks
    assert any(
        "hooks (a trusted project's hooks go in .bastion/settings.toml)" in n for n in config.notes
    )


def test_the_trust_preview_names_a_projects_hooks(tmp_path):
    from runtime.setup.preview import project_preview

    project(tmp_path)
    lines = project_preview(str(tmp_path / "ws"))
    assert (
        "runs `echo project > project-hook-ran` without asking on every PreToolUse of "
        "run_command (sandboxed, no network)"
    ) in lines
