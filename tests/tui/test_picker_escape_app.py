"""Esc in the /resume picker, inside the app, closes the picker (the app's own
Esc, interrupt, is for the transcript, not for a screen pushed over it)."""

from __future__ import annotations

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tui.widgets.picker import SessionPicker

from .conftest import wait_for
from .test_slash import SIZE, run_command


async def test_escape_closes_the_resume_picker_in_the_app(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="A.")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"first", "enter")
        await run_command(app, pilot, "/resume")
        await wait_for(lambda: isinstance(app.screen, SessionPicker), pilot)
        await pilot.press("escape")
        await wait_for(lambda: not isinstance(app.screen, SessionPicker), pilot, timeout=5)
