"""Issue 38: a README a newcomer reads in five minutes, and docs that say everything.

The README stays under 300 lines and carries the exact test command `.ci/run` runs;
every slash command, key, command-line option and setting the app knows appears in
the README or a page under docs/; every relative link points to a file that exists."""

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


def test_every_key_the_app_binds_is_documented():
    from tui.app import BastionApp
    from tui.widgets.prompt import EDITOR_KEY, IMAGE_KEY, JUMP_KEYS, REDIRECT_KEYS

    text = docs_text()
    keys = {b.key for b in BastionApp.BINDINGS} - {"up", "down", "tab", "enter"}
    keys |= {EDITOR_KEY, IMAGE_KEY, *JUMP_KEYS, *REDIRECT_KEYS}
    missing = sorted(k for k in keys if _spelled(k) not in text)
    assert missing == [], f"not in the docs: {[_spelled(k) for k in missing]}"


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
    from runtime.setup import load

    text = docs_text()
    missing = sorted(key for key in load._KEYS if not re.search(rf"\b{key}\b", text))
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
