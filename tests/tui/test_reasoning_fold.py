"""Issue 27 item 14 in the app: reasoning shows as it streams, folded to one line by
default (how much the model has thought); a click unfolds it; `/effort` sets the
conversation's reasoning effort and the status line shows it. `--plain` says in one dim
line that the model reasons, never what."""

from __future__ import annotations

import re

import pytest
import textual

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import (
    SIZE,
    client_of,
    make_app,
    open_driven,
    run_settled,
    screen_settled,
    wait_for,
)
from tests.tui.test_plain import Keyboard, console
from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL
from tui.plain import LineMode
from tui.widgets.entries import AssistantEntry
from tui.widgets.reasoning import ReasoningFold

THOUGHT = "First I will read the file. Then I will answer briefly. " * 6  # ~3 s of stream


async def test_reasoning_streams_folded_and_a_click_unfolds_it(harness_process, tmp_path):
    turn = ScriptedTurn(reasoning=THOUGHT, text="Done.", chunk_size=4, delay=0.03)
    # (a screen that holds output back while the user types shows it within ~1 s)
    proc = harness_process(ScriptedProvider([turn]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"think", "enter")
        fold = None

        def thinking() -> bool:
            nonlocal fold
            folds = list(app.query(ReasoningFold))
            fold = folds[0] if folds else None
            return fold is not None and "thinking…" in str(fold.render())

        await wait_for(thinking, pilot)  # shown while it streams, before the answer
        assert fold is not None and THOUGHT[:8] not in str(fold.render())  # folded
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        folded = str(fold.render())
        assert "thought" in folded and f"{len(THOUGHT)} chars" in folded
        assert THOUGHT not in folded
        await pilot.click(ReasoningFold)
        await pilot.pause(0.05)
        assert THOUGHT.strip() in str(fold.render()).replace("\n", " ")
        await pilot.click(ReasoningFold)
        await pilot.pause(0.05)
        assert THOUGHT not in str(fold.render())
        [entry] = app.query(AssistantEntry)
        assert entry.text_shown == "Done."


async def test_an_answer_without_reasoning_shows_no_fold(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="Hi.")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"hello", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        [fold] = app.query(ReasoningFold)
        assert not fold.has_class("-shown") and not fold.display


async def test_effort_command_sets_it_and_the_status_line_shows_it(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="Hi.")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"hello", "enter")  # stored: the setting has a home
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.press(*"/effort high", "enter")
        await wait_for(lambda: "(high)" in str(app.query_one("#status-left").render()), pilot)
        conv = await app.harness.get_conversation(app.conversation_id)
        assert conv.agent.reasoning_effort == "high"
        await pilot.press(*"/effort extreme", "enter")
        await pilot.pause(0.1)
        assert (
            await app.harness.get_conversation(app.conversation_id)
        ).agent.reasoning_effort == "high"
        await pilot.press(*"/effort default", "enter")
        await wait_for(lambda: "(high)" not in str(app.query_one("#status-left").render()), pilot)


SNAP_THOUGHT = "The user wants a short answer. I should check the config loader first. " * 5


def test_reasoning_folded_snapshot(snap_compare, tmp_path):
    """Above the answer "Use `data.get`." a muted italic line `▸ thought · 355 chars ·
    click to show`; the reasoning itself is nowhere on screen. Status bar
    `● done · ask · scripted/bastion-test …`."""
    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip("snapshots were made with another textual")
    turns = [ScriptedTurn(reasoning=SNAP_THOUGHT, text="Use `data.get`.", chunk_size=40)]
    app = make_app(tmp_path, turns, first_prompt="How do I fix parse_config?")

    assert snap_compare(app, terminal_size=(80, 24), run_before=screen_settled)


async def test_plain_says_when_the_model_reasons_but_not_what(tmp_path):
    turn = ScriptedTurn(reasoning="secret chain of thought " * 20, text="Answer.", chunk_size=8)
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([turn]))
    try:
        con, out = console()
        assert await LineMode(await client_of(harness), conv_id, con, Keyboard("think")).loop() == 0
        text = out.getvalue()
        assert re.search(r"▸ (thinking…|thought · 480 chars)", text)
        assert "secret chain" not in text and "Answer." in text
        assert text.index("▸ ") < text.index("Answer.")
    finally:
        await harness.close()
