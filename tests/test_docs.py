"""Issue 38: a README a newcomer reads in five minutes, and docs that say everything.

The README stays under 300 lines and carries the exact test command `.ci/run` runs;
every slash command, key (bound or named by /help), subcommand, command-line option
and setting the app knows appears in the README or a page under docs/; every relative
link points to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"
)


def docs_text() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text(encoding="utf-8") for p in pages)


def test_the_readme_is_short_and_carries_the_test_command_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    assert TEST_COMMAND in readme
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text()


def test_every_slash_command_is_documented():
    from tui.slash import COMMANDS

    text = docs_text()
    missing = [c.name for c in COMMANDS if f"/{c.name}" not in text]
    assert missing == [], f"not in the docs: {missing}"


def _spelled(key: str) -> str:
    """`shift+tab` as the docs spell it: Shift+Tab."""
    names = {"pageup": "PageUp", "pagedown": "PageDown", "escape": "Esc", "enter": "Enter",
             "tab": "Tab", "up": "Up", "down": "Down", "home": "Home", "end": "End"}  # fmt: skip
    return "+".join(names.get(part, part.capitalize() if len(part) > 1 else part.upper())
                    for part in key.split("+"))  # fmt: skip


def _help_keys(front_end: str) -> set[str]:
    """The keys `/help` lists in `front_end` ("app" or "plain"), as it spells them."""
    import asyncio
    from types import SimpleNamespace

    from tui.slash import show_help

    said: list[str] = []
    host = SimpleNamespace(front_end=front_end, say=lambda text, **_: said.append(text))
    asyncio.run(show_help(host, ""))  # type: ignore[arg-type]
    lines = "\n".join(said).splitlines()
    keys_at = next(i for i, line in enumerate(lines) if line.startswith("[b]keys[/]"))
    text = "\n".join(lines[keys_at:]).replace("[b]keys[/]", "")
    return set(re.findall(r"(?:(?:ctrl|shift|alt)\+)+[a-z]+|\b(?:enter|tab|esc)\b", text))


def test_the_help_keys_are_found():
    """The parser of /help's key lines finds what they say (else the next test is empty)."""
    assert {"shift+tab", "ctrl+s", "ctrl+enter", "ctrl+g", "ctrl+v"} <= _help_keys("app")
    assert {"alt+enter", "ctrl+j", "ctrl+d"} <= _help_keys("plain")


def _app_keys() -> set[str]:
    """The keys the app binds and its prompt handles (Up/Down/Enter aside: everyone
    knows them)."""
    from tui.app import BastionApp
    from tui.widgets.prompt import (
        EDITOR_KEY,
        FOLLOW_UP_KEYS,
        IMAGE_KEY,
        JUMP_KEYS,
        NEWLINE_KEYS,
        REDIRECT_KEYS,
    )

    keys = {b.key for b in BastionApp.BINDINGS} - {"up", "down", "enter"}
    return keys | {
        EDITOR_KEY,
        IMAGE_KEY,
        *JUMP_KEYS,
        *REDIRECT_KEYS,
        *NEWLINE_KEYS,
        *FOLLOW_UP_KEYS,
    }


def test_every_key_the_app_binds_is_documented():
    text = docs_text()
    keys = _app_keys()
    keys |= _help_keys("app") | _help_keys("plain")
    missing = sorted(k for k in keys if _spelled(k) not in text)
    assert missing == [], f"not in the docs: {[_spelled(k) for k in missing]}"


def test_every_subcommand_is_documented():
    from tui.cli import SUBCOMMANDS

    text = docs_text()
    missing = [name for name in SUBCOMMANDS if f"bastion {name}" not in text]
    assert missing == [], f"not in the docs: {missing}"


def test_every_command_line_option_is_documented():
    from tui.parsers import SUBCOMMAND_PARSERS, main_parser

    text = docs_text()
    parsers = [main_parser(), *(make() for make in SUBCOMMAND_PARSERS.values())]
    options = {
        option
        for parser in parsers
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }
    missing = sorted(o for o in options if o not in text)
    assert missing == [], f"not in the docs: {missing}"


def test_every_setting_is_documented():
    """Every key config.toml accepts: the top level, a provider's, a model's, a hook's
    (and its events) and an MCP server's."""
    from runtime.hooks import config as hooks
    from runtime.mcp import config as mcp
    from runtime.setup import load

    text = docs_text()
    keys = {
        *load._KEYS, *load._PROVIDER_KEYS, *load._MODEL_KEYS,
        *hooks._ENTRY_KEYS, *hooks.EVENTS, *mcp.KEYS,
    }  # fmt: skip
    missing = sorted(key for key in keys if not re.search(rf"\b{key}\b", text))
    assert missing == [], f"not in the docs: {missing}"


def test_every_relative_link_points_to_a_file_that_exists():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text("utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == [], broken


def _readme_table(heading: str) -> list[str]:
    """The first column of the table under `## heading` in the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [re.split(r"(?<!\\)\|", row)[1].strip() for row in rows[2:]]


def test_the_readme_command_table_is_the_apps_command_list():
    """Issue 40: the README's commands are exactly what /help lists, usage and all."""
    from tui.slash import COMMANDS

    shown = [cell.strip("`").replace("\\|", "|") for cell in _readme_table("Commands")]
    assert shown == [c.usage for c in COMMANDS]


def test_the_readme_key_table_names_every_key_the_app_binds_and_help_lists():
    """Issue 40: every key /help names in the app, and every key the app binds, has a
    row in the README's key table (and each row names a key the app knows)."""
    from tui.app import BastionApp

    table = "\n".join(_readme_table("Keys"))
    keys = _help_keys("app") | _app_keys() | {BastionApp.COMMAND_PALETTE_BINDING}
    missing = sorted(_spelled(k) for k in keys if _spelled(k) not in table)
    assert missing == [], f"not in the README's key table: {missing}"
    known = {_spelled(k) for k in keys} | {"y", "a", "n", "e", "Up", "Down", "Tab", "Enter",
                                           "Alt+Enter", "Home", "End", "PageDown", "drag"}  # fmt: skip
    for row in _readme_table("Keys"):
        named = [k.strip() for k in re.split(r" / |\(|\)| twice|, then ", row) if k.strip()]
        assert all(k in known for k in named), (row, [k for k in named if k not in known])
