"""Snapshots of the prompt, its commands and the inbox at 80x24 and 140x45.

Each test says what you should see. Update with `--snapshot-update` and look at
every SVG (see tests/tui/test_snapshots.py for how screens are pinned).
"""

from __future__ import annotations

from typing import Any

import pytest
import textual

from tests.tui.conftest import HangingProvider, make_app, until_still, wait_for
from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL
from tui.widgets import AssistantEntry, CommandOutput, PromptInput

SMALL = (80, 24)
LARGE = (140, 45)
SIZES = pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])


@pytest.fixture(autouse=True)
def _same_textual() -> None:
    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")


async def _ready(pilot: Any) -> None:
    await wait_for(pilot.app.ready.is_set, pilot)
    await until_still(pilot)


@SIZES
def test_empty_start(snap_compare, tmp_path, size):
    """A new conversation: `bastion  type a request and press Enter` at the top, the
    empty prompt box with "Ask Bastion to do something…" at the bottom, and the status
    line `idle · ask · scripted/bastion-test · ctx ~0 · 7b8c9d0e`; at 140 columns the
    key hints (enter send, tab follow-up, shift+tab mode, /help) on the right, at 80
    they are left out."""
    assert snap_compare(make_app(tmp_path, []), terminal_size=size, run_before=_ready)


@SIZES
def test_help(snap_compare, tmp_path, size):
    """`/help` was run: above the empty prompt, a panel with an accent bar on its left
    lists "commands" — /help, /model [NAME], /mode [MODE], /effort [LEVEL], /new (also /clear),
    /resume, /compact [INSTRUCTIONS], /reset [INSTRUCTIONS], /supersede [MESSAGE],
    /urgent MESSAGE, /export [markdown|json], /theme [NAME], /cost,
    /quit (also /exit) each with what it does — and a "keys" block, its last line
    `ctrl+s (ctrl+enter) cut the run's step, send this now`, `ctrl+g edit in $VISUAL/$EDITOR · ctrl+v paste an image`. The status line stays `idle · ask · …`: nothing was sent."""
    app = make_app(tmp_path, [])

    async def help_shown(pilot: Any) -> None:
        await _ready(pilot)
        pilot.app.query_one(PromptInput).set_value("/help")
        await pilot.press("enter")
        await wait_for(lambda: pilot.app.query_one(CommandOutput).shown, pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=size, run_before=help_shown)


@SIZES
def test_queued_steer_and_follow_up(snap_compare, tmp_path, size):
    """A run still going ("Refactor the loader", the partial "Reading the loader
    first."). Above the prompt, the inbox strip: `» steer     keep the public API` and
    `» follow-up then run the tests  (↑ on an empty prompt edits it)`. The prompt's
    placeholder says Enter steers and Tab queues a follow-up. The status line starts
    `◌ writing · ask · 2 queued · scripted/bastion-test`."""
    provider = HangingProvider("Reading the loader first.")
    app = make_app(tmp_path, provider, first_prompt="Refactor the loader")

    async def queued(pilot: Any) -> None:
        await wait_for(provider.streamed.is_set, pilot)
        await wait_for(lambda: bool(list(pilot.app.query(AssistantEntry))), pilot)
        await pilot.press(*"keep the public API", "enter")
        await wait_for(lambda: len(pilot.app.view.queued_inbox) == 1, pilot)
        await pilot.press(*"then run the tests", "tab")
        await wait_for(lambda: len(pilot.app.view.queued_inbox) == 2, pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=size, run_before=queued)
