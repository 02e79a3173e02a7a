"""Issue 25, item 13 (held follow-ups) in the front ends: input queued behind a run
that fails is shown as held; `/send` in the line mode and Ctrl+R in the app send it."""

from __future__ import annotations

from runtime.model.llm import ProviderError
from runtime.model.records import InboxMode
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import client_of, open_driven, wait_for
from tests.tui.test_plain import Keyboard, console
from tui.plain import LineMode
from tui.widgets.inbox import InboxStrip

BROKEN = ProviderError("bad request", provider="s", status=400)


async def failed_with_one_held(tmp_path):
    """A driven conversation whose first run failed with a follow-up held behind it."""
    provider = ScriptedProvider(
        [ScriptedTurn(error=BROKEN, delay=0.05), ScriptedTurn(text="the follow-up answer")]
    )
    harness, conv_id = await open_driven(tmp_path, provider)
    first = await harness.submit(conv_id, "first")
    follow = await harness.submit(conv_id, "then this", mode=InboxMode.FOLLOW_UP)
    assert (await harness.wait(first.id, conv_id)).state == "failed"
    return harness, conv_id, follow, provider


async def test_held_input_line_mode_says_held_and_send_sends_it(tmp_path) -> None:
    harness, conv_id, follow, provider = await failed_with_one_held(tmp_path)
    con, out = console()
    try:
        assert await LineMode(await client_of(harness), conv_id, con, Keyboard("/send")).loop() == 0
        run = await harness.wait(follow.id, conv_id)
        assert run.state == "completed"
        text = out.getvalue()
        assert "1 message held (the run before failed): /send sends it" in text
        assert "sent 1 held message" in text
        assert provider.requests[-1].messages[-1].content == "then this"
    finally:
        await harness.close()


async def test_held_input_line_mode_send_with_nothing_held_says_so(tmp_path) -> None:
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([]))
    con, out = console()
    try:
        assert await LineMode(await client_of(harness), conv_id, con, Keyboard("/send")).loop() == 0
        assert "nothing is held" in out.getvalue()
    finally:
        await harness.close()


async def test_held_input_app_shows_held_and_ctrl_r_sends_it(harness_process) -> None:
    """The harness process's first run fails (HTTP 400, its answer a moment late) with a
    follow-up queued behind it, sent by another client of the session."""
    broken = {"fault": {"status": 400, "delay_first_byte_ms": 200}}
    proc = harness_process([broken, {"text": "the follow-up answer"}])
    app = proc.app()
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        client, conv_id = app.harness, app.conversation_id
        first = await client.submit(conv_id, "first")
        follow = await client.submit(conv_id, "then this", mode=InboxMode.FOLLOW_UP)
        assert (await client.wait(first.id, conv_id)).state == "failed"
        await wait_for(lambda: bool(app.view and app.view.held_inbox), pilot)
        strip = app.query_one(InboxStrip)
        await wait_for(lambda: strip.shown, pilot)
        shown = str(strip.render())
        assert "held" in shown and "then this" in shown and "Ctrl+R" in shown
        await pilot.press("ctrl+r")
        run = await client.wait(follow.id, conv_id)
        assert run.state == "completed"
        await wait_for(lambda: not strip.shown, pilot)
    assert proc.requests[-1].body["messages"][-1]["content"] == "then this"
