"""Esc in the /resume picker, inside the app, closes the picker (the app's own
Esc, interrupt, is for the transcript, not for a screen pushed over it)."""

from __future__ import annotations

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import app_over
from tui.widgets.picker import SessionPicker

from .conftest import open_driven, wait_for
from .test_slash import SIZE, run_command


async def test_escape_closes_the_resume_picker_in_the_app(tmp_path):
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([ScriptedTurn(text="A.")]))
    app = app_over(harness, conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            await pilot.press(*"first", "enter")
            await run_command(app, pilot, "/resume")
            await wait_for(lambda: isinstance(app.screen, SessionPicker), pilot)
            await pilot.press("escape")
            await wait_for(lambda: not isinstance(app.screen, SessionPicker), pilot, timeout=5)
    finally:
        await harness.close()
