"""Issue 25, item 5 (resume) in the app: a session resumed after a crash mid-answer
shows the kept partial marked interrupted, and the continuation as its own entry
under it; the partial's text appears once."""

from __future__ import annotations

from textual.widgets import Static

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.runtime.test_resume_partial import crashed_mid_answer
from tests.tui.conftest import SIZE, app_over, run_settled, wait_for
from tests.tui.test_app import assistant_widgets


async def test_resume_partial_app_shows_it_interrupted_and_the_rest_under_it(tmp_path) -> None:
    conv_id, item_id = await crashed_mid_answer(tmp_path)
    provider = ScriptedProvider([ScriptedTurn(text="and the rest.")])
    harness = await open_harness(tmp_path, provider)
    await harness.drive(conv_id, interactive=True)
    await harness.wait(item_id, conv_id)
    partial = next(e for e in (await harness.snapshot(conv_id)).entries if e.kind == "assistant")
    app = app_over(harness, conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            await wait_for(lambda: run_settled(app), pilot)
            await wait_for(lambda: len(assistant_widgets(app)) == 2, pilot)
            await pilot.pause(0.05)
            first, second = assistant_widgets(app)
            assert first.text_shown == partial.text and second.text_shown == "and the rest."
            marker = str(first.query_one(".marker", Static).render())
            assert "interrupted" in marker and first.query_one(".marker").has_class("-shown")
            assert not second.query_one(".marker").has_class("-shown")
    finally:
        await harness.close()
