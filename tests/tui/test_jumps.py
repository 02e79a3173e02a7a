"""Issue 36: the top of a long session in one key, and a window bounded above and below.
Ctrl+Home (Home on an empty prompt) puts the first turn at the top of the screen;
Ctrl+End (End) the last, following again; scrolling from the top mounts rows below
and unmounts rows far above, so the rows mounted stay bounded wherever the user is."""

from __future__ import annotations

from tests.tui.conftest import SIZE, run_settled, wait_for
from tests.tui.test_long import open_long_session
from tui.widgets import AssistantEntry, PromptInput, UserEntry
from tui.widgets.transcript import MOST_MOUNTED, Transcript


def mounted(app) -> int:
    transcript = app.query_one(Transcript)
    return len(transcript.query(UserEntry)) + len(transcript.query(AssistantEntry))


async def test_ctrl_home_and_ctrl_end_and_the_window_stays_bounded(harness_process):
    proc, conv_id = await open_long_session(harness_process, 300)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        transcript = app.query_one(Transcript)
        await pilot.press("ctrl+home")
        await wait_for(lambda: app.query(UserEntry).first().entry.text == "question 0", pilot)
        await wait_for(lambda: transcript.scroll_y == 0 and not transcript.following, pilot)
        assert mounted(app) < 60
        # Down from the top: rows below are mounted, rows far above unmounted (from about
        # the 11th page on, at this size).
        for _ in range(20):
            await pilot.press("pagedown")
            await pilot.pause(0.02)
            assert mounted(app) <= MOST_MOUNTED + 130  # (a reveal's batch on top)
        assert app.query(UserEntry).first().entry.text != "question 0"
        await pilot.press("ctrl+end")
        await wait_for(lambda: transcript.following, pilot)
        await wait_for(
            lambda: app.query(AssistantEntry).last().text_shown == "Answer number 299.", pilot
        )
        # Home and End on an empty prompt do the same; with text they move the cursor.
        await pilot.press("home")
        await wait_for(lambda: app.query(UserEntry).first().entry.text == "question 0", pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"abc", "home", "X")
        assert prompt.text == "Xabc"
        assert app.query(UserEntry).first().entry.text == "question 0"  # no jump
        prompt.set_value("")
        await pilot.press("end")
        await wait_for(lambda: transcript.following, pilot)


async def test_after_a_jump_a_typed_prompt_is_sent_exactly(harness_process):
    from runtime.testing.scripted import ScriptedTurn

    proc, conv_id = await open_long_session(harness_process, 120, ScriptedTurn(text="Sent."))
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press("ctrl+home")
        await wait_for(lambda: app.query(UserEntry).first().entry.text == "question 0", pilot)
        await pilot.press(*"needle0003/resume", "enter")
        await wait_for(lambda: run_settled(app) and len(app.view.runs) == 121, pilot)
        asked = [e.text for e in app.view.entries if e.kind == "user"]
        assert asked[-1] == "needle0003/resume"


async def test_goto_shows_the_nth_message(harness_process):
    from tests.tui.test_slash import run_command, said

    proc, conv_id = await open_long_session(harness_process, 80)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await wait_for(lambda: len(app.query_one(Transcript)._order) == 160, pilot)
        await run_command(app, pilot, "/goto 5")
        await wait_for(lambda: "message 5 of 80" in said(app), pilot)
        transcript = app.query_one(Transcript)
        row = next(w for w in transcript.query(UserEntry) if w.entry.text == "question 4")

        def at_the_top() -> bool:  # (rows above it may be mounted, the place kept)
            return abs(row.region.y - transcript.region.y) <= 2

        await wait_for(at_the_top, pilot)
        await run_command(app, pilot, "/goto 81")
        await wait_for(lambda: "from 1 to 80" in said(app), pilot)
