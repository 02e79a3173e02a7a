"""The [hooks] table: its shape, its one-line errors, matchers, and that the settings
file keeps hooks when bastion writes an approval rule back to it."""

from __future__ import annotations

import pytest

from runtime.config.rules import command_rule
from runtime.config.settings import add_project_rules
from runtime.hooks import HookSet, HookSpec, parse_hooks, project_hooks
from runtime.model.errors import ConfigError
from runtime.model.rules import Scope
from runtime.setup.load import load_config


def test_a_table_per_command_with_a_default_timeout():
    found = parse_hooks(
        {
            "timeout": 30,
            "PreToolUse": [{"matcher": "run_command", "command": "check", "timeout": 5}],
            "Stop": [{"command": "notify"}],
        },
        "config.toml",
    )
    assert found.hooks == (
        HookSpec("PreToolUse", "check", "run_command", 5.0),
        HookSpec("Stop", "notify", "*", 30.0),
    )


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"PreTool": [{"command": "x"}]}, "hooks.PreTool is not a hook event"),
        ({"Stop": {"command": "x"}}, "hooks.Stop must be an array of tables"),
        ({"Stop": [{"command": ""}]}, "hooks.Stop[0].command must be a non-empty string"),
        ({"Stop": [{"command": "x", "timeout": 0}]}, "hooks.Stop[0].timeout must be a number"),
        ({"Stop": [{"command": "x", "timeout": True}]}, "hooks.Stop[0].timeout must be a number"),
        ({"Stop": [{"command": "x", "when": 1}]}, "hooks.Stop[0] has unknown key 'when'"),
        ({"Stop": [{"command": "x", "matcher": 3}]}, "hooks.Stop[0].matcher must be a string"),
        ({"timeout": 601}, "hooks.timeout must be a number"),
    ],
)
def test_a_wrong_table_is_one_line_naming_file_and_key(table, says):
    with pytest.raises(ConfigError) as caught:
        parse_hooks(table, "/home/me/.config/bastion/config.toml")
    assert caught.value.message.startswith("/home/me/.config/bastion/config.toml: " + says)
    assert "\n" not in caught.value.message


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [
        ("*", "run_command", True),
        ("run_command", "run_command", True),
        ("run_command", "run_commands", False),
        ("edit_*", "edit_file", True),
        ("edit_*", "write_file", False),
        ("write_file|edit_file", "edit_file", True),
        ("github__*", "github__create_issue", True),
        ("Bash", "run_command", False),
    ],
)
def test_matchers(matcher, tool, runs):
    assert HookSpec("PreToolUse", "x", matcher).matches(tool) is runs


def test_the_users_config_file_sets_hooks(tmp_path):
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[[hooks.PostToolUse]]\nmatcher = "edit_file"\ncommand = "fmt"\n')
    assert load_config(str(tmp_path)).hooks == HookSet(
        (HookSpec("PostToolUse", "fmt", "edit_file"),)
    )


def test_a_bad_hooks_table_in_the_users_file_stops_loading(tmp_path):
    path = tmp_path / "config" / "bastion" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[[hooks.OnEdit]]\ncommand = "fmt"\n')
    with pytest.raises(ConfigError, match=r"hooks\.OnEdit is not a hook event"):
        load_config(str(tmp_path))


def test_writing_a_rule_keeps_the_projects_hooks(tmp_path):
    folder = tmp_path / ".bastion"
    folder.mkdir()
    (folder / "settings.toml").write_text(
        '[[hooks.PostToolUse]]\nmatcher = "edit_file"\ncommand = "ruff format ."\ntimeout = 20\n'
    )
    add_project_rules(tmp_path, [command_rule("git status", Scope.PROJECT)])
    assert project_hooks(str(tmp_path)).hooks == (
        HookSpec("PostToolUse", "ruff format .", "edit_file", 20.0, "project"),
    )


def test_doctor_lists_the_hooks_a_session_here_would_run(tmp_path, monkeypatch, capsys, trusted):
    from tui.cli import main

    monkeypatch.chdir(tmp_path)
    main(["doctor"])
    assert "ok   hooks     none configured" in capsys.readouterr().out
    user = tmp_path / "config" / "bastion" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[[hooks.Stop]]\ncommand = "notify-send done"\n')
    (tmp_path / ".bastion").mkdir()
    (tmp_path / ".bastion" / "settings.toml").write_text(
        '[[hooks.SessionStart]]\ncommand = "git log -1"\n'
    )
    main(["doctor"])
    out = capsys.readouterr().out
    assert (
        "ok   hooks     1 configured: Stop `notify-send done`\n" in out
    )  # untrusted: theirs unread
    trusted(tmp_path)
    main(["doctor"])
    assert "2 configured: Stop `notify-send done`; SessionStart `git log -1` (project)" in (
        capsys.readouterr().out
    )
