"""The multi-line prompt: Enter sends, Shift+Enter / Ctrl+J break the line, a paste arrives whole."""

from __future__ import annotations

from textual import events

from runtime.model.records import EntryKind
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, run_settled, wait_for
from tui.widgets import PromptInput


async def test_a_pasted_block_of_three_lines_is_sent_whole(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="ok")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        app.post_message(events.Paste("first line\nsecond line\nthird line"))
        await pilot.pause()
        assert prompt.text == "first line\nsecond line\nthird line"
        assert not app.view.runs  # a paste never sends
        await pilot.press("enter")
        await wait_for(lambda: run_settled(app), pilot)
        assert prompt.text == ""
    snap = await proc.snapshot()
    assert [(e.kind, e.text) for e in snap.entries] == [
        (EntryKind.USER, "first line\nsecond line\nthird line"),
        (EntryKind.ASSISTANT, "ok"),
    ]
    assert len(snap.runs) == 1


async def test_shift_enter_and_ctrl_j_break_the_line_and_the_prompt_grows_then_scrolls(
    harness_process, tmp_path
):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        one_line = prompt.outer_size.height
        await pilot.press("a", "shift+enter", "b", "ctrl+j", "c")
        assert prompt.text == "a\nb\nc"
        assert prompt.outer_size.height == one_line + 2
        for _ in range(10):
            await pilot.press("ctrl+j", "x")
        await pilot.pause()
        assert prompt.text.count("\n") == 12
        assert prompt.outer_size.height == 8  # its max-height: from here it scrolls
        assert prompt.max_scroll_y > 0
        assert not app.view.runs


async def test_up_and_down_move_between_lines_before_they_walk_the_history(
    harness_process, tmp_path
):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="A.")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"earlier", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press("x", "ctrl+j", "y")
        await pilot.press("up")  # from the second line to the first: no recall yet
        assert prompt.text == "x\ny" and prompt.cursor_location[0] == 0
        await pilot.press("up")  # on the first line: the history
        assert prompt.text == "earlier"
        await pilot.press("down")  # on the last line: back to the draft
        assert prompt.text == "x\ny"
