"""Shift+Tab modes, Tab follow-ups, Up withdrawing, and the status line at three widths."""

from __future__ import annotations

import re

from runtime.model.records import InboxMode, InboxState
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import HangingProvider, run_settled, wait_for
from tests.tui.process import hanging
from tui.app import BastionApp
from tui.widgets import CommandOutput, InboxStrip, PromptInput

SIZE = (100, 32)


def status(app: BastionApp) -> str:
    return str(app.query_one("#status-left").render())


async def test_shift_tab_cycles_the_mode_and_keeps_the_draft_and_the_focus(
    harness_process, tmp_path
):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"half a thought", "ctrl+j", *"more")
        seen = []
        for _ in range(5):
            await pilot.press("shift+tab")
            await wait_for(lambda: app.settings.approval_mode not in seen[-1:], pilot)
            seen.append(app.settings.approval_mode)
            assert f"{app.settings.approval_mode}  ·" in status(app)
            assert app.focused is prompt
            assert (await app.harness.session_settings(app.conversation_id)).approval_mode == seen[
                -1
            ]
        assert seen == ["auto-edit", "full-auto", "plan", "read-only", "ask"]
        await pilot.press(*" typed on")
        assert prompt.text == "half a thought\nmore typed on"
        assert not app.query_one(CommandOutput).shown  # the status line says it
        await pilot.press("shift+tab", "shift+tab", "shift+tab")  # one step each
        await wait_for(lambda: app.settings.approval_mode == "plan", pilot)


async def test_tab_queues_a_follow_up_and_up_pulls_the_newest_back(harness_process, tmp_path):
    provider = HangingProvider("Working")
    proc = harness_process(provider)
    app = proc.app(first_prompt="start")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await wait_for(lambda: app.view is not None and app.view.active_run is not None, pilot)
        await pilot.press(*"steer it", "enter")
        await pilot.press(*"then this", "tab")
        await wait_for(lambda: len(app.view.queued_inbox) == 2, pilot)
        strip = str(app.query_one(InboxStrip).render())
        assert "steer" in strip and "follow-up" in strip and "then this" in strip
        assert "2 queued" in status(app)
        prompt = app.query_one(PromptInput)
        assert prompt.text == ""
        await pilot.press("up")  # the newest (the follow-up) comes back, withdrawn
        await wait_for(lambda: prompt.text == "then this", pilot)
        await wait_for(lambda: len(app.view.queued_inbox) == 1, pilot)
        await pilot.press("up")  # not empty any more: Up is the history now
        assert prompt.text == "start"
    snap = await proc.snapshot()
    modes = {i.text: (i.mode, i.state) for i in snap.inbox}
    assert modes["then this"] == (InboxMode.FOLLOW_UP, InboxState.WITHDRAWN)
    assert modes["steer it"] == (InboxMode.STEER, InboxState.QUEUED)


async def test_up_says_so_when_the_run_took_the_item_first(harness_process):
    proc = harness_process([hanging("Working")])
    app = proc.app(first_prompt="start")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await pilot.press(*"late steer", "enter")
        await wait_for(lambda: len(app.view.queued_inbox) == 1, pilot)
        stale = app.view
        [item] = stale.queued_inbox
        # someone else got there first (another terminal on the session, say)
        assert await app.harness.withdraw(app.conversation_id, item.id)
        await wait_for(lambda: not app.view.queued_inbox, pilot)
        app.view = stale  # the app's view one frame behind the harness process's
        await app._pull_queued(app.query_one(PromptInput))
        await pilot.pause()
        assert any("already taken" in n.message for n in app._notifications)
        assert app.query_one(PromptInput).text == ""


async def test_a_follow_up_while_idle_starts_a_run(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="ok")]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"hello", "tab")
        await wait_for(lambda: run_settled(app), pilot)
    snap = await proc.snapshot()
    assert [e.text for e in snap.entries] == ["hello", "ok"]


async def status_at(harness_process, width: int) -> tuple[str, str]:
    proc = harness_process([hanging("Working on it")])
    app = proc.app(first_prompt="start")
    async with app.run_test(size=(width, 24)) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await pilot.press(*"more", "enter")
        await wait_for(lambda: bool(app.view and app.view.queued_inbox), pilot)
        await pilot.pause(0.1)
        return status(app), str(app.query_one("#status-right").render())


async def test_the_status_line_drops_fields_by_priority(harness_process):
    wide, hints = await status_at(harness_process, 180)
    for part in ("◌ writing", "ask", "1 queued", "openai/test", "ctx ~"):
        assert part in wide
    assert "enter" in hints and "follow-up" in hints
    medium, hints = await status_at(harness_process, 80)
    assert "◌ writing" in medium and "ask" in medium and "openai/test" in medium
    assert hints == ""  # the key hints go first
    narrow, hints = await status_at(harness_process, 60)
    assert narrow.startswith("◌ writing  ·  ask")  # the state is never cut
    assert "ctx" not in narrow and hints == ""
    assert len(narrow) <= 58


async def test_the_status_line_counts_down_to_a_retry(harness_process):
    proc = harness_process([{"fault": {"status": 429, "retry_after": 3}}, {"text": "at last"}])
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: "retrying in 3 s" in status(app), pilot)
        # It counts down (a slow machine may draw 2 s or only 1 s before the retry).
        await wait_for(lambda: re.search(r"retrying in [12] s", status(app)) is not None, pilot)
        await wait_for(lambda: run_settled(app), pilot)
        assert "retrying" not in status(app) and "done" in status(app)
    assert len(proc.requests) == 2
