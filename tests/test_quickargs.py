"""tui.quickargs reads a session command exactly as its argparse parser does, or
leaves it to the parser: checked on every command line of up to four words from a
pool that holds the flags, their abbreviations, values and mistakes."""

from __future__ import annotations

import contextlib
import io
import itertools
import subprocess
import sys

import pytest

from tui.exits import UsageError
from tui.parsers import SUBCOMMAND_PARSERS
from tui.quickargs import quick_parse

POOLS = {
    "sessions": ["search", "rm", "--json", "--all", "--force", "w1", "abcd", "-", "--js", "-h",
                 "", "list", "--"],
    "export": ["0123abcd", "x", "--format", "json", "markdown", "txt", "-o", "out.md",
               "--output", "--format=json", "-", "--fo"],
    "fork": ["0123abcd", "e1", "--at", "--a", "-x", "", "--"],
}  # fmt: skip


def _argparse(name: str, words: list[str]) -> dict | None:
    """argparse's reading of the words, or None when it refuses them or prints help."""
    parser = SUBCOMMAND_PARSERS[name]()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return vars(parser.parse_args(words))
        except (UsageError, SystemExit):
            return None


@pytest.mark.parametrize("name", sorted(POOLS))
def test_quick_reading_agrees_with_argparse(name: str) -> None:
    pool, read, left = POOLS[name], 0, 0
    for size in range(5):
        for words in itertools.product(pool, repeat=size):
            quick = quick_parse(name, list(words))
            if quick is None:
                left += 1
                continue
            read += 1
            assert vars(quick) == _argparse(name, list(words)), words
    assert read >= 10 and left >= 10  # both paths were taken


def test_the_usual_forms_are_read_quickly() -> None:
    for name, words in [
        ("sessions", []),
        ("sessions", ["--all", "--json"]),
        ("sessions", ["search", "needle", "--json"]),
        ("sessions", ["--json", "rm", "0123abcd", "--force"]),
        ("export", ["0123abcd", "--format", "markdown", "-o", "out.md"]),
        ("fork", ["0123abcd", "--at", "0199"]),
    ]:
        assert quick_parse(name, words) is not None, words


def test_a_session_listing_loads_neither_argparse_nor_typing(tmp_path) -> None:
    """The point of the quick path: `bastion sessions` imports no argparse, re or
    typing (the store it reads is made first, by the harness, in this process)."""
    script = (
        "import sys\n"
        "before = set(sys.modules)  # (an editable install's finder loads re at start)\n"
        "from tui.cli import main\n"
        "code = main(['sessions', '--all'])\n"
        "heavy = sorted(m for m in ('argparse', 're', 'typing', 'asyncio', 'dataclasses') "
        "if m in sys.modules and m not in before)\n"
        "print(code, heavy)\n"
    )
    make = "import asyncio; from runtime.store.database import Store\n"
    make += f"async def go():\n    s = await Store.open({str(tmp_path / 'bastion.sqlite')!r})\n"
    make += "    await s.close()\nasyncio.run(go())\n"
    env = {"BASTION_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", make], env=env, check=True)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
