"""Which sandbox commands get: the user's config, a project's (deny entries only),
flags and approval modes; an approval's "outside the sandbox once" through the real
toolbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.config.trust import TrustState, set_trust
from runtime.harness.approving import check_sandbox_answer
from runtime.model.errors import ConfigError
from runtime.model.rules import BadRule
from runtime.run.sandboxing import choose_sandbox
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import load_config
from tools.denylist import DEFAULT_DENY
from tools.sandbox import SandboxMode, probe


def configs(tmp_path: Path, user: str, project: str = "") -> tuple[str, dict[str, str]]:
    (tmp_path / "config" / "bastion").mkdir(parents=True)
    (tmp_path / "config" / "bastion" / "config.toml").write_text(user)
    repo = tmp_path / "repo"
    (repo / ".bastion").mkdir(parents=True)
    (repo / ".bastion" / "config.toml").write_text(project)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    set_trust(repo, TrustState.TRUSTED, env)  # (untrusted, the project file is not read)
    return str(repo), env


def test_defaults_follow_the_approval_mode(tmp_path: Path) -> None:
    config = load_config(*configs(tmp_path, ""))
    assert choose_sandbox(config, "full-auto").mode is SandboxMode.WORKSPACE_WRITE
    assert choose_sandbox(config, "ask").mode is SandboxMode.WORKSPACE_WRITE
    assert choose_sandbox(config, "read-only").mode is SandboxMode.READ_ONLY
    policy = choose_sandbox(config, "auto-edit")
    assert not policy.network and policy.deny == DEFAULT_DENY


def test_the_user_sets_everything_and_a_flag_wins(tmp_path: Path) -> None:
    user = (
        'sandbox_mode = "read-only"\nnetwork = true\nwritable_paths = ["~/.cache"]\n'
        'deny_paths = ["secrets"]\n'
    )
    config = load_config(*configs(tmp_path, user, 'deny_paths = [".env", "keys/*"]\n'))
    policy = choose_sandbox(config, "full-auto")
    assert policy.mode is SandboxMode.READ_ONLY and policy.network
    assert policy.writable == ("~/.cache",)
    assert policy.deny == ("secrets", ".env", "keys/*")  # the project only adds
    flagged = choose_sandbox(config, "full-auto", "danger-full-access")
    assert flagged.mode is SandboxMode.DANGER_FULL_ACCESS


def test_a_project_may_narrow_the_sandbox_to_read_only(tmp_path: Path) -> None:
    user = 'sandbox_mode = "danger-full-access"\n'
    config = load_config(*configs(tmp_path, user, 'sandbox_mode = "read-only"\n'))
    assert choose_sandbox(config, "full-auto").mode is SandboxMode.READ_ONLY


@pytest.mark.parametrize(
    "line",
    [
        'sandbox_mode = "danger-full-access"',
        'sandbox_mode = "workspace-write"',
        "network = true",
        'writable_paths = ["/"]',
    ],
)
def test_a_project_cannot_widen_the_sandbox(tmp_path: Path, line: str) -> None:
    """Even trusted, a project's wider sandbox setting is ignored, and said so."""
    config = load_config(*configs(tmp_path, "", line + "\n"))
    for approval in ("read-only", "full-auto"):
        policy = choose_sandbox(config, approval)
        assert policy.mode is (
            SandboxMode.READ_ONLY if approval == "read-only" else SandboxMode.WORKSPACE_WRITE
        )
        assert not policy.network and policy.writable == ()
    key = line.split(" ")[0]
    if key != "sandbox_mode" or "danger" in line:
        (note,) = config.notes
        assert key in note and "config.toml" in note


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('sandbox_mode = "none"', "sandbox_mode must be one of"),
        ('network = "yes"', "network must be true or false"),
        ('deny_paths = ".env"', "deny_paths must be an array of paths"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, line: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_config(*configs(tmp_path, line + "\n"))


def test_sandbox_answers_are_once_and_approving() -> None:
    check_sandbox_answer(True, None, "outside")
    for approve, always, sandbox in [(False, None, "outside"), (True, "session", "network")]:
        with pytest.raises(BadRule):
            check_sandbox_answer(approve, always, sandbox)
    with pytest.raises(BadRule, match="unknown sandbox answer"):
        check_sandbox_answer(True, None, "everything")


@pytest.mark.skipif(not probe().landlock, reason=f"no Landlock here: {probe().describe()}")
async def test_outside_once_runs_the_command_unsandboxed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    box = WorkspaceToolbox(str(root), tmp_path / "artifacts")
    try:
        command = '{"command": "echo x > ../escaped.txt"}'
        denied = await box.run("run_command", command)
        assert not (tmp_path / "escaped.txt").exists()
        assert "output reports a refused write to" in denied.model_text
        allowed = await box.run("run_command", command, sandbox="outside")
        assert allowed.ok and (tmp_path / "escaped.txt").exists()
    finally:
        box.close()
