"""Opening a stored session (`bastion -r ID`): the first frame drawn shows the session.

The screen holds its frames until the first view is shown (for FIRST_VIEW_WAIT at
most); the hidden parts (inbox strip, approval line, command output, hints, @file
list) are mounted after that frame, and show the view once they are.
"""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.model.errors import UnknownConversation
from runtime.model.records import Approval
from tests.tui.conftest import SIZE, wait_for
from tests.tui.test_approval_keys import command_turns
from tests.tui.test_long import open_long_session
from tui.app import BastionApp
from tui.widgets import ApprovalPrompt, AssistantEntry


def record_frames(app: BastionApp, monkeypatch: Any) -> list[tuple[int, bool]]:
    """Each frame the app draws, as (answers mounted, hidden parts mounted) then."""
    frames: list[tuple[int, bool]] = []
    real = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None and not app._batch_count:  # (else it draws nothing)
            frames.append((len(app.query(AssistantEntry)), app.parts_ready.is_set()))
        real(screen, renderable)

    monkeypatch.setattr(app, "_display", display)
    return frames


async def test_the_first_frame_shows_the_sessions_end_and_the_parts_come_after(
    harness_process, monkeypatch
):
    monkeypatch.setattr("tui.app.FIRST_VIEW_WAIT", 30.0)  # (a loaded machine is slow)
    proc, conv_id = await open_long_session(harness_process, 30)
    app = proc.app(resume=conv_id)  # (stored=True, as `bastion -r` builds it)
    assert app._stored
    frames = record_frames(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.parts_ready.is_set, pilot)
        await pilot.pause(0.1)
        assert frames, "no frame was drawn"
        answers, parts = frames[0]
        assert answers > 0, "the first frame was drawn before the session's view"
        assert not parts, "the hidden parts were mounted before the first frame"
        assert app.query(AssistantEntry).last().text_shown == "Answer number 29."
        assert app.query_one("#inbox") and app.ready.is_set()


async def test_a_new_session_draws_its_prompt_at_once(harness_process, monkeypatch):
    """(Unchanged: a new session's prompt takes keys with the first frame, and the
    parts come before its view.) The harness process is held from handing the session
    over until the test lets it."""
    release = asyncio.Event()
    proc = harness_process([])
    app = proc.app()
    opener = app._opener

    async def late() -> tuple[Any, str]:
        await release.wait()
        return await opener()

    app._opener = late
    frames = record_frames(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.parts_ready.is_set, pilot)
        assert frames and not app.ready.is_set()
        release.set()
        await wait_for(app.ready.is_set, pilot)


async def test_a_view_that_is_slow_to_come_lets_the_screen_draw_meanwhile(
    harness_process, monkeypatch
):
    monkeypatch.setattr("tui.app.FIRST_VIEW_WAIT", 0.2)
    release = asyncio.Event()
    proc, conv_id = await open_long_session(harness_process, 2)
    app = proc.app(resume=conv_id)  # `bastion -r ID`: a stored session
    opener = app._opener

    async def late() -> tuple[Any, str]:  # the harness process is slow to hand it over
        await release.wait()
        return await opener()

    app._opener = late
    frames = record_frames(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(frames), pilot)  # after FIRST_VIEW_WAIT
        assert frames[0] == (0, False) and not app.ready.is_set()
        await pilot.press(*"hi")  # the prompt takes keys and shows them meanwhile
        await wait_for(lambda: app.query_one("#prompt").text == "hi", pilot)
        release.set()
        await wait_for(app.parts_ready.is_set, pilot)
        assert app.query(AssistantEntry).last().text_shown == "Answer number 1."


async def test_a_stored_session_that_cannot_open_ends_the_app_with_its_error():
    async def opener() -> tuple[Any, str]:
        raise UnknownConversation("no conversation 0192", hint="list them")

    app = BastionApp(opener=opener, stored=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
    assert app.return_code == 2
    assert isinstance(app.open_error, UnknownConversation)


async def test_an_approval_waiting_in_a_stored_session_is_asked_once_the_parts_are_there(
    harness_process,
):
    """A harness process asks about a command and ends before anyone answers; `bastion
    -r ID` (a new harness process) asks again once its parts are there."""
    proc = harness_process(command_turns("git status"))
    owner, conv_id = await proc.driving(None)
    try:
        await owner.submit(conv_id, "status")

        async def asked() -> None:
            while not any(c.approval == Approval.PENDING for c in await calls()):
                await asyncio.sleep(0.02)  # (poll interval: wait_for bounds it)

        async def calls() -> list[Any]:
            return list((await owner.snapshot(conv_id)).tool_calls)

        await asyncio.wait_for(asked(), 10)
    finally:
        await owner.close()
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.parts_ready.is_set, pilot)
        prompt = app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
        assert prompt.call is not None and prompt.call.name == "run_command"
        await wait_for(lambda: bool(prompt.rules), pilot)  # what `a` would save
