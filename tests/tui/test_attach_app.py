"""The Textual app attached to a session another harness drives (`bastion attach` on a terminal).

The driving harness serves its socket as any driver does; the app opens a client on
it with the session's token, as `bastion attach` does (tui.attach_app.opener), and
speaks the one protocol over it: everything the first terminal can do.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import textual

from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import (
    SIZE,
    notices,
    open_driven,
    run_settled,
    wait_for,
)
from tests.tui.process import hanging
from tui.app import BastionApp
from tui.attach_app import opener as attach_opener
from tui.widgets import ApprovalPrompt


async def test_the_attached_app_streams_sends_and_answers_an_approval(harness_process):
    write = {
        "id": "call_w",
        "name": "write_file",
        "arguments": {"path": "notes.txt", "content": "hi"},
    }
    proc = harness_process(
        [
            {"text": "Set up."},
            {"text": "streamed to a second screen", "chunk_size": 2, "delay_ms": 10},
            {"text": "Writing.", "tool_calls": [write]},
            {"text": "Written."},
        ]
    )
    owner, conv_id = await proc.driving("set up")  # the first terminal's harness process
    app = proc.attached(conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            await wait_for(lambda: "live from the process driving it" in notices(app), pilot)
            await pilot.press(*"hello", "enter")
            await wait_for(lambda: run_settled(app), pilot)
            assert app.view.entries[-1].text == "streamed to a second screen"
            await pilot.press(*"write", "enter")
            prompt = app.query_one(ApprovalPrompt)
            # (shown, then focused: a `y` before the focus moves is typed into the prompt)
            await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
            assert not (proc.work / "notes.txt").exists()
            await pilot.press("y")
            await wait_for(lambda: run_settled(app) and len(app.view.runs) == 3, pilot)
            assert (proc.work / "notes.txt").read_text() == "hi"
            assert app.view.entries[-1].text == "Written."
    finally:
        await owner.close()


async def test_escape_in_the_attached_app_interrupts_the_driving_process(harness_process):
    proc = harness_process([{"text": "Set up."}, hanging("this goes on")])
    owner, conv_id = await proc.driving("set up")
    app = proc.attached(conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set(), pilot)
            await pilot.press(*"go", "enter")
            await wait_for(lambda: len(proc.requests) == 2, pilot)
            await wait_for(lambda: bool(app.view.active_run), pilot)
            await pilot.press("escape")
            await wait_for(lambda: run_settled(app), pilot)
            assert app.view.runs[-1].state == "interrupted"
            # Quitting the attached app leaves the session to its driver.
            await pilot.press("ctrl+c", "ctrl+c")
        proc.add_turns({"text": "still here"})
        item = await owner.submit(conv_id, "still there?")  # the driving process goes on
        assert (await owner.wait(item.id, conv_id)).state == "completed"
    finally:
        await owner.close()


def test_snapshot_attached_app_asking_for_approval(snap_compare, tmp_path):
    """The answer "Writing the fix." and a yellow `? write_file {...} awaiting approval`
    line; above the prompt the yellow-barred `Allow write_file src/config.py ?`, `a saves:
    edits under src/` and `[y]once [a]always [n]deny [e]deny with a message`;
    the status bar says `awaiting approval` on the left. (The notice saying where the
    session is driven names a pid: it is cleared before the picture.)"""
    from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL, TableToolbox

    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")
    args = json.dumps({"path": "src/config.py", "content": "def parse_config(text): ..."})
    turn = ScriptedTurn(
        text="Writing the fix.", tool_calls=(ToolCall("call_w", "write_file", args),)
    )

    drivers: list[Any] = []

    async def opener() -> tuple[Any, str]:
        # (the driving harness on the app's loop, as snapshots need; closed after it)
        driver, conv_id = await open_driven(tmp_path, ScriptedProvider([turn]), TableToolbox())
        drivers.append(driver)
        await driver.submit(conv_id, "Fix parse_config")
        client, _ = await attach_opener(conv_id, [], driver.home)()
        client.serving = asyncio.ensure_future(_close_after(client, driver))
        return client, conv_id

    async def until_asking(pilot: Any) -> None:
        await pilot.app.parts_ready.wait()  # mounted after the first frame
        prompt = pilot.app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown"), pilot)
        await wait_for(lambda: pilot.app.view.active_run.state == "awaiting_approval", pilot)
        pilot.app.clear_notifications()
        await pilot.pause(0.1)

    app = BastionApp(opener=opener)
    assert snap_compare(app, terminal_size=SIZE, run_before=until_asking)


async def test_every_slash_command_in_the_attached_app_acts_and_the_first_terminal_shows_it(
    harness_process,
):
    """Issue 35: a second terminal (`bastion attach`) can do everything the first can.
    Both terminals are the app, over the one protocol: the first is `bastion` over its
    harness process, the second `bastion attach ID` on that process's attach socket.
    Each command typed in the second does what it does in the first, and the first
    terminal shows the result. (The first terminal sends the first prompt: a new
    session is stored, and served on its attach socket, from then.)"""
    from tests.tui.test_slash import run_command, said, status, transcript_text
    from tui.slash import COMMANDS
    from tui.widgets import PromptInput

    write = {"id": "w1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi"}}
    proc = harness_process(
        [{"text": "Set up."}, {"text": "Writing.", "tool_calls": [write]}, {"text": "Wrote it."},
         {"text": "Second answer."}, {"text": "Summary of it all."}, {"text": "Handoff note."},
         {"text": "In the new one."}]
    )  # fmt: skip
    work = proc.work
    first = proc.app(first_prompt="set up")
    tried: set[str] = set()

    async def command(line: str, expect: Any) -> None:
        tried.add(line.split()[0][1:])
        await run_command(second, p2, line)
        try:
            await wait_for(expect, p2)
        except AssertionError:
            raise AssertionError(f"{line}: {said(second)!r} / {status(second)!r}") from None

    async with first.run_test(size=SIZE) as p1:
        await wait_for(lambda: run_settled(first), p1)
        conv_id = first.conversation_id
        driving = proc.children[-1].process.pid  # the first terminal's harness process
        second = proc.attached(conv_id)
        async with second.run_test(size=SIZE) as p2:
            await wait_for(lambda: first.ready.is_set() and second.ready.is_set(), p2)
            assert second.harness.guest and not first.harness.guest
            # A prompt and its approval, from the second terminal.
            await p2.press(*"write the notes", "enter")
            prompt = second.query_one(ApprovalPrompt)
            await wait_for(lambda: prompt.has_class("-shown") and second.focused is prompt, p2)
            await p2.press("y")
            await wait_for(lambda: "Wrote it." in transcript_text(first), p1)
            assert (work / "notes.txt").read_text() == "hi"
            # The model and the approval mode: both terminals' status lines change.
            await command("/model openai/other", lambda: "other" in status(second))
            await wait_for(lambda: "openai/other" in status(first), p1)
            await command("/mode read-only", lambda: "read-only" in status(second))
            await wait_for(lambda: "read-only" in status(first), p1)
            await p2.press("shift+tab")  # the next mode, as in the first terminal
            await wait_for(lambda: "read-only" not in status(first), p1)
            assert status(first).split("·")[0] == status(second).split("·")[0]
            await command("/mode auto-edit", lambda: "auto-edit" in status(first))
            await command("/effort high", lambda: "high" in said(second))
            await command("/cost", lambda: "over 2 run" in said(second))
            await command("/mcp", lambda: "MCP" in said(second) or "mcp" in said(second))
            await command("/jobs", lambda: "no background jobs" in said(second))
            await command("/agents", lambda: "no background agents" in said(second))
            await command("/send", lambda: "nothing" in said(second))
            await command("/export json", lambda: (work / f"bastion-{conv_id[:8]}.json").exists())
            await command("/theme", lambda: "theme" in said(second))
            await command("/copy", lambda: "copied the last answer" in said(second))
            await command("/approve", lambda: "nothing to approve" in said(second))
            await command("/goto 1", lambda: "message 1 of" in said(second))
            assert second.clipboard == "Wrote it."
            await command("/help", lambda: "/model [NAME]" in said(second))
            # /compact: the summary entry shows in the first terminal too.
            await p2.press(*"and then", "enter")
            await wait_for(lambda: "Second answer." in transcript_text(first), p1)
            await command("/compact", lambda: "compacted" in said(second))
            await wait_for(lambda: any(e.kind == "summary" for e in first.view.entries), p1)
            # /reset: the reset entry shows in the first terminal; /supersede and /urgent
            # with no run going each say so in one line (issue 37).
            await command("/reset", lambda: "reset: a new context" in said(second))
            await wait_for(lambda: any(e.kind == "reset" for e in first.view.entries), p1)
            await command("/supersede", lambda: "nothing to supersede" in said(second))
            await command("/urgent", lambda: "usage: /urgent MESSAGE" in said(second))
            # /fork and /rewind move the second terminal on; the first stays, driven.
            await command("/fork", lambda: second.conversation_id != conv_id)
            forked = second.conversation_id
            await command(f"/resume {conv_id}", lambda: second.conversation_id == conv_id)
            await command("/rewind 2", lambda: "rewound" in said(second))
            assert second.query_one(PromptInput).text == "write the notes"
            await command("/restore", lambda: "removed notes.txt" in said(second))
            assert not (work / "notes.txt").exists()
            second.query_one(PromptInput).set_value("")
            await command("/new", lambda: bool(second.query("#welcome")))
            await p2.press(*"hello", "enter")
            await wait_for(lambda: "In the new one." in transcript_text(second), p2)
            assert first.conversation_id == conv_id
            assert (await proc.lease(conv_id)).pid == driving  # still driven there
            assert (await proc.lease(forked)).owner is None  # (left: no one follows it)
            await command(f"/resume {conv_id}", lambda: second.conversation_id == conv_id)
            await command("/clear", lambda: second.conversation_id != conv_id)
            await command(f"/resume {conv_id}", lambda: second.conversation_id == conv_id)
            await run_command(second, p2, "/quit")
            tried.add("quit")
            await wait_for(lambda: not second.is_running, p1)
            assert first.is_running and first.conversation_id == conv_id
        names = {c.name for c in COMMANDS}
        assert names <= tried | {"clear", "exit"}, names - tried
        assert (await proc.lease(conv_id)).pid == driving  # the session goes on


async def test_every_key_of_the_app_in_the_attached_app_acts_as_in_the_first(harness_process):
    """Issue 26 and 35: each of the app's keys, pressed in `bastion attach`, does what it
    does in the first terminal (the first terminal shows the result); none ends the app.
    The first terminal is `bastion` (its harness process drives the session), the
    second `bastion attach ID` on that process's attach socket."""
    from tests.tui.test_slash import said, status
    from tui.widgets import PromptInput

    proc = harness_process([{"text": "Set up."}, hanging("this goes on")])
    first = proc.app(first_prompt="set up")  # (a session is stored with its first prompt)
    async with first.run_test(size=SIZE) as p1:
        await wait_for(lambda: run_settled(first), p1)
        conv_id = first.conversation_id
        app = proc.attached(conv_id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: app.ready.is_set() and first.ready.is_set(), pilot)
            await pilot.press(*"go", "enter")
            await wait_for(lambda: bool(first.view and first.view.active_run), p1)
            # Tab queues a follow-up (the first terminal sees it queued); Up takes it back.
            await pilot.press(*"later", "tab")
            await wait_for(lambda: bool(first.view.queued_inbox), p1)
            await pilot.press("up")
            prompt = app.query_one(PromptInput)
            await wait_for(lambda: not first.view.queued_inbox and prompt.text == "later", p1)
            prompt.set_value("")
            # Shift+Tab switches the approval mode: the first terminal shows the new one.
            before = status(first)
            await pilot.press("shift+tab")
            await wait_for(lambda: status(first) != before, p1)
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
            await wait_for(lambda: "nothing is held" in said(app) or said(app) == "", pilot)
            # Escape interrupts the run: the first terminal shows it interrupted.
            await pilot.press("escape")
            await wait_for(lambda: first.view.active_run is None, p1)
            assert first.view.runs[-1].state == "interrupted"
            await pilot.press("ctrl+c")
            await pilot.pause(0.05)
            assert app.is_running
            await pilot.press("ctrl+c")
            await wait_for(lambda: not app.is_running, p1)
        proc.add_turns({"text": "still here"})  # the session goes on in the first terminal
        await p1.press(*"still there?", "enter")
        await wait_for(lambda: first.view.entries[-1].text == "still here", p1)
        assert first.view.runs[-1].state == "completed"


async def _close_after(client: Any, driver: Any) -> None:
    """Close the driving harness once the attached client has left (the app's close)."""
    while client.gone is None:  # (as long as the app runs: the test's timeout bounds it)
        await asyncio.sleep(0.05)  # (poll interval)
    await driver.close()
