"""The approval rules engine: prefixes on word boundaries, compound commands, folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runtime.config.rules import allowing, command_rule, edits_rule, propose
from runtime.config.shell import split_commands
from runtime.model.rules import BadRule, Rule, RuleKind


def cmd(text: str) -> str:
    return json.dumps({"command": text})


def allowed(rules: list[str], text: str) -> bool:
    return bool(allowing([command_rule(r) for r in rules], "run_command", cmd(text)))


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("git status", True),
        ("git status -s", True),
        ("git  status\t--short", True),
        ("'git' \"status\"", True),
        ("git statusx", False),
        ("git", False),
        ("echo git status", False),
        ("gitx status", False),
        ("git stat", False),
        ("git status; rm -rf /", False),
        ("git status && rm -rf /", False),
        ("git status | sh", False),
        ("git status\nrm -rf /", False),
        ("git status 'a; rm -rf /'", True),  # quoted: one argument
        ('git status "a && b"', True),
        ("git status a\\;b", True),
        ("git status $(rm -rf /)", False),
        ("git status `rm -rf /`", False),
        ('git status "$(rm -rf /)"', False),
        ("git status $HOME", False),
        ("git status > out.txt", False),
        ("git status >> out.txt", False),
        ("git status 2>/dev/null", True),
        ("git status 2>&1", True),
        ("git status < /etc/passwd", False),
        ("git status <<EOF\nx\nEOF", False),
        ("git status <(ls)", False),
        ("(git status)", False),
        ("{ git status; }", False),
        ("git status &", False),
        ("git status & rm x", False),
        ("git status 'unterminated", False),
        ("git sta\\\ntus", True),  # a line continuation joins the word
        ("g* status", False),
        ("git st* -s", False),
        ("GIT_DIR=/x git status", False),
    ],
)
def test_prefix_on_word_boundaries(text: str, ok: bool) -> None:
    assert allowed(["git status"], text) is ok, text


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("git status && git diff", True),
        ("git status; git diff --stat", True),
        ("git status || git diff", True),
        ("git diff | git status", True),
        ("git status\ngit diff", True),
        ("git status && git push", False),
        ("git status; git diff; rm x", False),
        ("git status && git diff $(x)", False),
    ],
)
def test_compound_needs_every_part(text: str, ok: bool) -> None:
    assert allowed(["git status", "git diff"], text) is ok, text


def test_allowing_names_each_rule_used() -> None:
    rules = [command_rule("git status"), command_rule("git diff")]
    used = allowing(rules, "run_command", cmd("git status && git diff && git status -s"))
    assert [r.pattern for r in used] == ["git status", "git diff"]


def test_argv_form_is_quoted_back() -> None:
    rules = [command_rule("git status")]
    args = json.dumps({"argv": ["git", "status", "; rm -rf /"]})
    assert allowing(rules, "run_command", args)
    args = json.dumps({"argv": ["git", "statusx"]})
    assert not allowing(rules, "run_command", args)


def test_settings_file_is_never_allowed_by_a_rule() -> None:
    rules = [command_rule("cat"), edits_rule(".")]
    assert not allowing(rules, "run_command", cmd("cat .bastion/settings.toml"))
    args = json.dumps({"path": ".bastion/settings.toml", "content": "x"})
    assert not allowing(rules, "write_file", args)
    assert not allowing(rules, "edit_file", json.dumps({"path": ".Bastion/settings.toml"}))
    with pytest.raises(BadRule):
        edits_rule(".bastion")


def test_bad_rule_text_is_refused() -> None:
    for text in ("git status && rm", "$(x)", "git st*", "", "a > b"):
        with pytest.raises(BadRule):
            command_rule(text)


def write(path: str) -> str:
    return json.dumps({"path": path, "content": "x"})


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("src/a.py", True),
        ("./src/a.py", True),
        ("src/deep/er/a.py", True),
        ("src", False),  # the folder itself is not under it
        ("srcx/a.py", False),
        ("docs/a.md", False),
        ("src/../docs/a.md", False),
        ("../src/a.py", False),
        ("/src/a.py", False),
        ("~/src/a.py", False),
        ("src\\a.py", False),
    ],
)
def test_folder_rule(path: str, ok: bool) -> None:
    rules = [edits_rule("src")]
    assert bool(allowing(rules, "write_file", write(path))) is ok, path
    assert bool(allowing(rules, "edit_file", write(path))) is ok, path


def test_folder_rule_refuses_a_symlink_on_the_way(tmp_path: Path) -> None:
    from runtime.run.toolbox import WorkspaceToolbox

    (tmp_path / "src").mkdir()
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    os.symlink(outside, tmp_path / "src" / "link")
    box = WorkspaceToolbox(str(tmp_path), tmp_path / "artifacts")
    try:
        rules = [edits_rule("src")]
        assert allowing(rules, "write_file", write("src/new/a.py"), box.resolve_path)
        assert allowing(rules, "write_file", write("src/a.py"), box.resolve_path)
        assert not allowing(rules, "write_file", write("src/link/a.py"), box.resolve_path)
        assert not allowing(rules, "write_file", write("src/link"), box.resolve_path)
    finally:
        box.close()


def test_whole_workspace_rule() -> None:
    rule = edits_rule(".")
    assert rule.pattern == ""
    assert allowing([rule], "write_file", write("a.py"))
    assert allowing([rule], "write_file", write("x/y/a.py"))


def test_reading_tools_and_unknown_tools_are_not_matched() -> None:
    assert not allowing([edits_rule(".")], "read_file", write("a.py"))
    assert not allowing([command_rule("ls")], "mystery", cmd("ls"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("git status -s", ["git status"]),
        ("git -C x status", []),  # a `git` rule would allow `git -c`
        ("npm run test -- --watch", ["npm run test"]),
        ("python -m pytest -q tests", []),  # an interpreter: never a rule
        ("uv run pytest", ["uv run pytest"]),
        ("cargo test --all", ["cargo test"]),
        ("ls -la", ["ls"]),
        ("rm -rf build", ["rm"]),
        ("pytest tests/x.py", ["pytest"]),
        ("git status && npm run lint", ["git status", "npm run lint"]),
        ("git status; git status -s", ["git status"]),
        ("ls $(pwd)", []),
        ("bash -c 'rm -rf /'", []),
        ("sudo rm -rf /", []),
        ("bash build.sh --fast", []),
        ("python -c 'print(1)'", []),
        ("python script.py", []),
        ("xargs rm", []),
        ("npx prettier --check .", []),
        ("uv run bash x.sh", []),
        ("find . -name x", ["find"]),
        ("find . -exec rm {} ;", []),
        ("FOO=1 make", []),
    ],
)
def test_proposal(text: str, expected: list[str]) -> None:
    assert [r.pattern for r in propose("run_command", cmd(text))] == expected


def test_proposal_then_allowed() -> None:
    text = "git status -s && npm run test -- -x"
    rules = propose("run_command", cmd(text))
    assert allowing(rules, "run_command", cmd(text))
    assert not allowing(rules, "run_command", cmd("git push"))


def test_proposal_skips_parts_already_allowed() -> None:
    have = [command_rule("git status")]
    got = propose("run_command", cmd("git status && make check"), have=have)
    assert [r.pattern for r in got] == ["make check"]


def test_proposal_for_edits_is_the_folder() -> None:
    assert propose("write_file", write("src/pkg/a.py")) == (Rule(RuleKind.EDITS, "src/pkg"),)
    assert propose("edit_file", write("a.py"))[0].describe() == "edits anywhere in the workspace"
    assert propose("write_file", write(".bastion/settings.toml")) == ()
    assert propose("write_file", write("../x")) == ()


def test_split_commands_words() -> None:
    got = split_commands('a \'b c\' "d\\"e" f\\ g # comment\nh')
    assert got is not None
    assert [[w.text for w in c] for c in got] == [["a", "b c", 'd"e', "f g"], ["h"]]
    assert split_commands("") is None
    assert split_commands("a && && b") is None
    assert split_commands("if true; then x; fi") is None


@pytest.mark.parametrize(
    "text",
    [
        "bash", "sh", "zsh", "python3", "python3.12", "/usr/bin/python", "pypy3", "node",
        "perl", "ruby", "env", "xargs", "sudo", "nohup", "time", "timeout", "nice", "command",
        "exec", "eval", "git", "uv run bash", "poetry run python3", "awk", "find -exec",
    ],
)  # fmt: skip
def test_a_rule_on_a_shell_interpreter_or_wrapper_is_refused(text: str) -> None:
    """Issue 23: a prefix rule on a program that runs its arguments would allow all."""
    if text == "find -exec":
        rule = command_rule("find")
        assert not allowing([rule], "run_command", cmd("find . -exec touch /tmp/x {} ;"))
        assert not allowing([rule], "run_command", cmd("find . -delete"))
        assert allowing([rule], "run_command", cmd("find . -name '*.py'"))
        return
    with pytest.raises(BadRule) as caught:
        command_rule(text)
    # (`time` is a reserved word of the shell: refused as no plain prefix at all)
    assert "would allow any command" in caught.value.message or text == "time"
    # a stored (or imported) rule of that shape allows nothing either
    forged = Rule(RuleKind.COMMAND, text)
    assert not allowing([forged], "run_command", cmd(f"{text} -c 'touch x'"))
