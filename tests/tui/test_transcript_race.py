"""The transcript's window changes one at a time, and a row is shown into only once
it is mounted.

A jump (Ctrl+Home, Ctrl+End, /goto) or a reveal (scrolling past the top or the end
of what is mounted) makes rows and awaits their mount; meanwhile the follow loop
shows the next view and renders its Markdown ahead. A row is composed (it has its
first text segment) only once its mount is done: shown into before that, an answer
raised IndexError. Each test holds a jump's mount open at that moment and does what
the follow loop would do then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import MappingProxyType
from typing import Any

from msgspec.structs import replace

from runtime.model.views import LiveText
from tests.tui.conftest import SIZE, wait_for
from tests.tui.test_long import open_long_session
from tui.widgets import AssistantEntry, Transcript


def hold_first_mount(transcript: Transcript, meanwhile: Callable[[], Awaitable[None]]) -> None:
    """The transcript's next `mount_all` runs `meanwhile` before it mounts anything."""
    real = transcript.mount_all

    def mount_all(widgets: Any, **where: Any) -> Any:
        transcript.mount_all = real  # type: ignore[method-assign]

        async def mounted_after() -> None:
            await meanwhile()
            await real(widgets, **where)

        return mounted_after()

    transcript.mount_all = mount_all  # type: ignore[method-assign]


async def test_a_view_shown_while_a_jump_mounts_its_rows_waits_for_them(harness_process):
    """A whole new view (a resync: every entry a new value, so every row is shown
    into) comes while Ctrl+Home mounts the first rows: it is shown once they are."""
    proc, conv_id = await open_long_session(harness_process, 30)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        transcript = app.query_one(Transcript)
        view = app.view
        resynced = replace(view, settled=tuple(e.but() for e in view.settled))
        shows: list[asyncio.Task[None]] = []

        async def show_the_resync() -> None:
            shows.append(asyncio.create_task(transcript.show(resynced)))
            await asyncio.sleep(0)  # (yield to the loop: the show starts now)

        hold_first_mount(transcript, show_the_resync)
        await transcript.jump_home()
        [show] = shows
        await asyncio.wait_for(show, 30)  # (an outer bound: it raised IndexError)
        answers = list(transcript.query(AssistantEntry))
        assert answers and answers[0].text_shown == "Answer number 0."
        assert all(a.entry is not None and a.text_shown == a.entry.text for a in answers)


async def test_markdown_rendered_ahead_while_a_jump_mounts_its_rows_skips_them(harness_process):
    """The follow loop renders a streaming answer's Markdown ahead (`next_render`)
    while Ctrl+End mounts the rows at the end, that answer's among them: a row not
    mounted yet has nothing to render into, and is left to the show after."""
    proc, conv_id = await open_long_session(harness_process, 30)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        transcript = app.query_one(Transcript)
        await transcript.jump_home()
        last = app.view.settled[-1]
        live = MappingProxyType({last.id: LiveText.of(last.text + " And more.")})
        streaming = replace(app.view, live=live)
        found: list[object] = []

        async def render_ahead() -> None:
            found.append(transcript.next_render(streaming))

        hold_first_mount(transcript, render_ahead)
        await transcript.jump_end()
        assert found == [None]
        await transcript.show(streaming)
        shown = transcript.query(AssistantEntry).last()
        assert shown.text_shown == "Answer number 29. And more."
