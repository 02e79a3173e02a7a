"""The Textual app attached to a session another harness drives (`bastion attach` on a terminal).

The driving harness serves its socket as any driver does; the app gets an
`AttachedHarness` over a second harness of its own, as `bastion attach` builds it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import textual

from runtime import Follower
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tests.tui.conftest import SIZE, HangingProvider, open_driven, run_settled, wait_for
from tui.app import BastionApp
from tui.attach_app import AttachedHarness
from tui.widgets import ApprovalPrompt


async def attached_app(tmp_path, provider, toolbox=None) -> tuple[BastionApp, Any]:
    driver, conv_id = await open_driven(tmp_path, provider, toolbox)
    other = await open_harness(tmp_path, ScriptedProvider())

    async def opener() -> tuple[Any, str]:
        return AttachedHarness(Follower(other, conv_id)), conv_id

    return BastionApp(opener=opener), driver


def status_notice(app: BastionApp) -> str:
    return str(app.query_one("#status-right").render())


async def test_the_attached_app_streams_sends_and_answers_an_approval(tmp_path):
    args = json.dumps({"path": "notes.txt"})
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="streamed to a second screen", chunk_size=2, delay=0.01),
            ScriptedTurn(text="Writing.", tool_calls=(ToolCall("call_w", "write_file", args),)),
            ScriptedTurn(text="Written."),
        ]
    )
    toolbox = RecordingToolbox()
    app, driver = await attached_app(tmp_path, provider, toolbox)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            await wait_for(lambda: "live from the driving process" in status_notice(app), pilot)
            await pilot.press(*"hello", "enter")
            await wait_for(lambda: run_settled(app), pilot)
            assert app.view.entries[-1].text == "streamed to a second screen"
            await pilot.press(*"write", "enter")
            prompt = app.query_one(ApprovalPrompt)
            # (shown, then focused: a `y` before the focus moves is typed into the prompt)
            await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
            assert toolbox.calls == []
            await pilot.press("y")
            await wait_for(lambda: run_settled(app) and len(app.view.runs) == 2, pilot)
            assert toolbox.calls == [("write_file", {"path": "notes.txt"})]
            assert app.view.entries[-1].text == "Written."
    finally:
        await driver.close()


async def test_escape_in_the_attached_app_interrupts_the_driving_process(tmp_path):
    provider = HangingProvider("this goes on")
    app, driver = await attached_app(tmp_path, provider)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            await pilot.press(*"go", "enter")
            await wait_for(lambda: provider.streamed.is_set(), pilot)
            await wait_for(lambda: bool(app.view.active_run), pilot)
            await pilot.press("escape")
            await wait_for(lambda: run_settled(app), pilot)
            assert app.view.runs[-1].state == "interrupted"
            # Quitting the attached app leaves the session to its driver.
            await pilot.press("ctrl+c", "ctrl+c")
        assert driver.driver(app.conversation_id) is not None
    finally:
        await driver.close()


class _DrivenElsewhere(AttachedHarness):
    """Closes the driving harness too: both were opened on the app's loop (snapshots)."""

    def __init__(self, follower: Follower, driver: Any) -> None:
        super().__init__(follower)
        self.driver = driver

    async def close(self) -> None:
        await super().close()
        await self.driver.close()


def test_snapshot_attached_app_asking_for_approval(snap_compare, tmp_path):
    """The answer "Writing the fix." and a yellow `? write_file {...} awaiting approval`
    line; above the prompt the yellow-barred `Allow write_file src/config.py ?`, `a saves:
    edits under src/` and `[y]once [a]always [n]deny [e]deny with a message`;
    the status bar says `awaiting approval` on the left and, in green, `attached ·
    live from the driving process` on the right (in place of the key hints)."""
    from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL, TableToolbox

    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")
    args = json.dumps({"path": "src/config.py", "content": "def parse_config(text): ..."})
    turn = ScriptedTurn(
        text="Writing the fix.", tool_calls=(ToolCall("call_w", "write_file", args),)
    )

    async def opener() -> tuple[Any, str]:
        driver, conv_id = await open_driven(tmp_path, ScriptedProvider([turn]), TableToolbox())
        await driver.submit(conv_id, "Fix parse_config")
        other = await open_harness(tmp_path, ScriptedProvider())
        return _DrivenElsewhere(Follower(other, conv_id), driver), conv_id

    async def until_asking(pilot: Any) -> None:
        await pilot.app.parts_ready.wait()  # mounted after the first frame
        prompt = pilot.app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown"), pilot)
        await wait_for(lambda: pilot.app.view.active_run.state == "awaiting_approval", pilot)
        await wait_for(lambda: "live from" in status_notice(pilot.app), pilot)
        await pilot.pause(0.1)

    app = BastionApp(opener=opener)
    assert snap_compare(app, terminal_size=SIZE, run_before=until_asking)


async def test_every_slash_command_in_the_attached_app_works_or_says_where(tmp_path):
    """Issues 26 and 27: `bastion attach` goes through the one command registry; each
    command works there or says in one line that it needs the driving terminal, and
    none ends the app (they used to raise AttributeError on the attached harness)."""
    from tests.tui.test_slash import run_command, said
    from tui.slash import ATTACHED_OK, COMMANDS

    provider = ScriptedProvider([ScriptedTurn(text="an answer")])
    app, driver = await attached_app(tmp_path, provider)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            for command in COMMANDS:
                if command.name in ("quit",):
                    continue
                await run_command(app, pilot, f"/{command.name}")
                if command.name in ATTACHED_OK:
                    continue
                await wait_for(
                    lambda name=command.name: (
                        f"/{name} works in the terminal that drives" in said(app)
                    ),
                    pilot,
                )
                assert app.is_running
            await run_command(app, pilot, "/help")
            await wait_for(lambda: "/model [NAME]" in said(app), pilot)
            await run_command(app, pilot, "/quit")
        assert driver.driver(app.conversation_id) is not None  # the session goes on
    finally:
        await driver.close()


async def test_every_key_of_the_app_in_the_attached_app_works_or_says_where(tmp_path):
    """Issue 26: each of the app's keys, pressed in `bastion attach`, works there or says
    in one line that it needs the driving terminal; none ends the app. (Up on a queued
    follow-up, Shift+Tab and Ctrl+R raised AttributeError on the attached harness.)"""
    from tests.tui.test_slash import said
    from tui.widgets import PromptInput

    provider = HangingProvider("this goes on")
    app, driver = await attached_app(tmp_path, provider)

    def notices() -> str:
        return "\n".join(n.message for n in app._notifications)

    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            await pilot.press(*"go", "enter")
            await wait_for(lambda: bool(app.view.active_run), pilot)
            # Tab queues a follow-up; Up takes it back into the prompt, withdrawn.
            await pilot.press(*"later", "tab")
            await wait_for(lambda: bool(app.view.queued_inbox), pilot)
            await pilot.press("up")
            prompt = app.query_one(PromptInput)
            await wait_for(lambda: not app.view.queued_inbox and prompt.text == "later", pilot)
            prompt.set_value("")
            # Shift+Tab (the approval mode) belongs to the driving terminal: one line says so.
            await pilot.press("shift+tab")
            await wait_for(lambda: "terminal that drives" in notices(), pilot)
            # Every other key the app binds, pressed once each.
            pressed = {"escape", "ctrl+c", "shift+tab"}
            for binding in BastionApp.BINDINGS:
                key = binding.key if hasattr(binding, "key") else binding[0]
                if key in pressed:
                    continue
                pressed.add(key)
                await pilot.press(key)
                await pilot.pause(0.05)
                assert app.is_running, f"{key} ended the attached app"
            assert {"pageup", "pagedown", "ctrl+o", "ctrl+r"} <= pressed
            await wait_for(lambda: "/send works in the terminal that drives" in said(app), pilot)
            # Escape interrupts the driving process's run; one Ctrl+C only warns.
            await pilot.press("escape")
            await wait_for(lambda: run_settled(app), pilot)
            await pilot.press("ctrl+c")
            await pilot.pause(0.05)
            assert app.is_running
            await pilot.press("ctrl+c")
        assert driver.driver(app.conversation_id) is not None  # the session goes on
    finally:
        await driver.close()
