"""Snapshots of `@` file completion, the session picker and the first-run screen.

Each test says what you should see. Kept apart from test_snapshots.py (same
pinned fixtures from conftest) so each screen family updates on its own:
`pytest tests/tui/test_picker_snapshots.py --snapshot-update`, look at them, then
`python -m tests.tui.test_picker_snapshots` copies the 80x24 ones to screenshots/.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import Harness, ProbeTarget, SessionSummary
from runtime.ipc.local import local_client
from runtime.model.records import Conversation
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import open_harness
from tests.tui.conftest import MODEL, SNAPSHOT_ID, until_still, wait_for
from tests.tui.test_snapshots import _same_textual  # noqa: F401 (an autouse fixture)
from tui.app import BastionApp
from tui.resume import PickerApp
from tui.widgets.completion import FileCompletion
from tui.widgets.firstrun import FirstRunApp, FirstRunScreen

SMALL, LARGE = (80, 24), (140, 45)
HERE = Path(__file__).parent
SCREENSHOTS = {  # snapshot file -> name under screenshots/ (the README shows them)
    "test_file_completion_open[80x24].svg": "app-mentions.svg",
    "test_session_picker[80x24].svg": "app-picker.svg",
    "test_first_run[80x24].svg": "app-first-run.svg",
    "test_session_picker_searched[80x24].svg": "app-picker-search.svg",
}
FILES = ["src/app/main.py", "src/app/models.py", "src/mapping.py", "docs/manual.md", "README.md"]


def completion_app(tmp_path: Path) -> BastionApp:
    root = tmp_path / "ws"
    for age, name in enumerate(FILES):  # fixed times: the list is newest first
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))

    async def opener() -> Any:
        harness = await open_harness(tmp_path, ScriptedProvider([]))
        conv = await harness.create_conversation(
            str(root), settings={"model": MODEL}, conversation_id=SNAPSHOT_ID
        )
        await harness.drive(conv.id, interactive=True)
        return await local_client(harness, client="test"), conv.id

    return BastionApp(opener=opener)


async def _typed_at_ma(pilot: Any) -> None:
    await wait_for(pilot.app.ready.is_set, pilot)
    await pilot.press(*"explain @ma")
    completion = pilot.app.query_one(FileCompletion)
    await wait_for(lambda: completion.is_open and completion.option_count == 3, pilot)
    await pilot.press("down")
    await until_still(pilot)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_file_completion_open(snap_compare, tmp_path, size):
    """The prompt reads `explain @ma`; above it a rounded box lists the files matching
    "ma", best first (all hold "ma" in the name, so the shorter path first):
    src/mapping.py, docs/manual.md, src/app/main.py, with the second (docs/manual.md)
    on a lighter band: Down moved there. src/app/models.py and README.md are not
    listed. The welcome line is at the top and the status bar at the bottom."""
    assert snap_compare(completion_app(tmp_path), terminal_size=size, run_before=_typed_at_ma)


NOW = 1_700_000_000.0


def picker_app() -> PickerApp:
    def row(n: int, title: str, cwd: str, minutes: float, entries: int) -> SessionSummary:
        cid = f"0192{n:04x}-7c1e-7d2a-9b3e-5f6a7b8c9d0e"
        return SessionSummary(Conversation(cid, title, cwd, {}, 0.0, NOW - minutes * 60), entries)

    sessions = [
        row(1, "Why does parse_config fail on an empty file?", "/src/bastion", 4, 6),
        row(2, "Add a --json flag to `bastion sessions`", "/src/bastion", 190, 14),
        row(3, "Release notes for 0.4", "/src/website", 30, 3),
        row(4, "Speed up the glob tool on big trees", "/src/bastion", 2 * 1440, 41),
        row(5, "Fix flaky CI on macOS", "/src/infra", 5 * 1440, 9),
    ]
    return PickerApp(sessions, "/src/bastion", now=NOW)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_session_picker(snap_compare, size):
    """A centred box titled "Resume a session" with the keys (type to filter, Enter
    opens, Esc cancels), a rounded filter box with its placeholder, then five sessions of
    two lines each: this directory's three first, newest first ("Why does parse_config
    fail…" 4m ago · 6 entries, highlighted; "Add a --json flag…" 3h ago; "Speed up the
    glob tool…" 2d ago), then the others with their directory in grey ("Release notes
    for 0.4" 30m ago /src/website; "Fix flaky CI on macOS" 5d ago /src/infra). At 80x24
    the list just fits; at the bottom: "5 of 5 sessions · 3 in this directory"."""
    assert snap_compare(picker_app(), terminal_size=size)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_session_picker_filtered(snap_compare, size):
    """The same picker with "bastion" typed in the filter: only the three sessions of
    /src/bastion (the directory holds the word), the first highlighted; the other two
    are gone and the count line reads "3 of 5 sessions · 3 in this directory"."""

    async def type_filter(pilot: Any) -> None:
        await pilot.press(*"bastion")
        await until_still(pilot)

    assert snap_compare(picker_app(), terminal_size=size, run_before=type_filter)


SEARCHED = [  # title, directory, prompt, answer: stored for real, then searched
    ("Why does parse_config fail on an empty file?", "/src/bastion",
     "parse_config raises on an empty file", "An empty file has no table: the walrus in "
     "load() assigns None and the lookup fails. Check for None before indexing."),
    ("Release notes for 0.4", "/src/website", "draft the 0.4 release notes",
     "Drafted: faster glob, a JSON flag, and the walrus operator cleanup in the loader."),
    ("Walrus cleanup", "/src/bastion", "list the places we assign in conditions", "Three."),
    ("Fix flaky CI on macOS", "/src/infra", "CI fails on macOS runners", "Pinned Xcode."),
]  # fmt: skip


def searched_picker(tmp_path: Path) -> tuple[PickerApp, Any]:
    """A picker over a real store holding SEARCHED (fixed ids), and what closes it. The
    search opens the store on the app's own loop at the first query."""

    async def seed() -> tuple[float, list[SessionSummary]]:
        provider = ScriptedProvider([ScriptedTurn(text=a) for _, _, _, a in SEARCHED])
        harness = await open_harness(tmp_path, provider)
        try:
            for n, (title, cwd, prompt, _) in enumerate(SEARCHED, 1):
                conv = await harness.create_conversation(
                    cwd, settings={"model": "scripted/x"}, title=title,
                    conversation_id=f"0192{n:04x}-7c1e-7d2a-9b3e-5f6a7b8c9d0e",
                )  # fmt: skip
                await harness.drive(conv.id, interactive=False)
                item = await harness.submit(conv.id, prompt)
                await harness.wait(item.id, conv.id)
                await harness.release(conv.id)
            sessions = await harness.session_summaries()
            return max(s.conversation.updated_at for s in sessions), sessions
        finally:
            await harness.close()

    newest, sessions = asyncio.run(seed())
    opened: list[Harness] = []

    async def search(query: str) -> Any:
        if not opened:
            opened.append(await open_harness(tmp_path, ScriptedProvider([])))
        return await opened[0].search(query)

    def close() -> None:
        for harness in opened:
            asyncio.run(harness.close())

    app = PickerApp(sessions, "/src/bastion", now=newest + 240, search=search)
    return app, close


async def _searched_walrus(pilot: Any) -> None:
    screen = pilot.app.screen
    await pilot.press(*"walrus")
    await wait_for(lambda: getattr(screen, "searched", None) == "walrus", pilot)
    await until_still(pilot)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_session_picker_searched(snap_compare, tmp_path, size):
    """The picker over a real store with "walrus" typed: the title now says "type to
    filter or search" and the placeholder is gone. First "Walrus cleanup" (its title
    holds the word; highlighted), then the two sessions whose answers hold it, each
    with a grey snippet under its age line and "walrus" in bold accent, best first:
    "Release notes for 0.4" with /src/website ("Drafted: … the walrus operator
    cleanup…"), then "Why does parse_config fail…" ("…the walrus in load()…").
    Each snippet is one line, cut with "…" where the list is narrower (80 columns).
    "Fix flaky CI on macOS" is not listed. Each age reads "4m ago"; at the bottom
    "3 of 4 sessions · 2 in this directory · 2 by their text"."""
    app, close = searched_picker(tmp_path)
    try:
        assert snap_compare(app, terminal_size=size, run_before=_searched_walrus)
    finally:
        close()


@pytest.fixture
def ollama_on_its_port() -> Any:
    """The loopback server on Ollama's own port, so the screen reads as it would."""
    server = LoopbackServer(port=11434)
    try:
        server.start()
    except OSError:
        pytest.skip("port 11434 is taken (a real Ollama?): the snapshot needs it")
    try:
        yield server
    finally:
        server.stop()


def first_run_app(monkeypatch: Any) -> FirstRunApp:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/home/you/.config")
    targets = [
        ProbeTarget("Ollama", "http://127.0.0.1:11434", "ollama"),
        ProbeTarget("llama.cpp", "http://127.0.0.1:9", "openai"),  # discard: nothing answers
    ]
    return FirstRunApp(targets, timeout=5)


async def _probed(pilot: Any) -> None:
    screen = pilot.app.screen
    await wait_for(lambda: isinstance(screen, FirstRunScreen) and screen.servers is not None, pilot)
    await until_still(pilot)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_first_run(snap_compare, monkeypatch, ollama_on_its_port, size):
    """No model configured: "bastion  Welcome: choose a model" at the top, then the
    three ways to set one (--model, BASTION_MODEL, `model = "PROVIDER/NAME"` in
    /home/you/.config/bastion/config.toml or .bastion/config.toml), the providers and
    their variables, and "Local servers that answered:" with "Ollama at
    http://127.0.0.1:11434: loopback:latest" and the command `bastion --model
    ollama/loopback:latest` under it; the keys (r asks again, q/Esc/Enter quits) in
    grey last. No line wraps at 80 columns; at 140 the text is a centred column."""
    app = first_run_app(monkeypatch)
    assert snap_compare(app, terminal_size=size, run_before=_probed)


def copy_screenshots(root: Path = HERE.parent.parent) -> list[Path]:
    """Copy these accepted snapshots to screenshots/ under their README names."""
    source = HERE / "__snapshots__" / "test_picker_snapshots"
    copied = []
    for name, public in SCREENSHOTS.items():
        if (source / name).exists():
            shutil.copyfile(source / name, root / "screenshots" / public)
            copied.append(root / "screenshots" / public)
    return copied


if __name__ == "__main__":
    for path in copy_screenshots():
        print(path, file=sys.stderr)
