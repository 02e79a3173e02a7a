"""Long answers and long sessions: what is mounted follows the screen, not the length.

A long answer is cut into Markdown segments only where the halves render as the whole
did; a long session opens on its end with a window of rows, and scrolling to the top
mounts earlier ones; streaming while the user reads above says so below.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import MappingProxyType
from typing import Any

import pytest
from msgspec.structs import replace

from runtime.model.records import EntryKind
from runtime.model.views import LiveText
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, app_over, open_driven, run_settled, wait_for
from tui.app import BastionApp
from tui.widgets import AssistantEntry, Transcript, UserEntry
from tui.widgets.markdown import MarkdownText
from tui.widgets.segments import Splitter
from tui.widgets.transcript import KEPT_ENTRIES


def cuts(text: str, size: int = 10, pieces: int = 1) -> list[int]:
    """The splitter's cuts when `text` arrives in `pieces` parts."""
    splitter = Splitter(size)
    live = LiveText.of("")
    step = -(-len(text) // pieces)
    for i in range(0, len(text), step):
        live = live.append(text[i : i + step])
        splitter.feed(live)
    return splitter.cuts


def test_cuts_go_before_paragraphs_and_headings_after_a_blank_line():
    text = "one two three\n\n# Head\n\nfour five six\n\nseven\n"
    # Each segment is at least 10 characters: "four five six" is only 8 past "# Head".
    assert cuts(text) == [0, 15, 38]
    starts = [text[c:].split("\n", 1)[0] for c in cuts(text)]
    assert starts == ["one two three", "# Head", "seven"]


def test_no_cut_inside_a_fence_a_list_a_quote_or_a_table():
    text = (
        "intro paragraph\n\n"
        "```python\n\nx = 1\n\nnot a cut\n```\n\n"
        "- item\n\n- item two\n\n"
        "1. first\n\n2. second\n\n"
        "> quoted\n\n> more\n\n"
        "| a | b |\n\n"
        "    indented code\n\n"
        "after all\n"
    )
    found = cuts(text, size=1)
    starts = [text[c:].split("\n", 1)[0] for c in found]
    assert starts == ["intro paragraph", "```python", "after all"]


def test_cuts_do_not_depend_on_how_the_text_arrives():
    text = "".join(f"## Part {i}\n\nSome text for part {i}.\n\n" for i in range(60))
    whole = cuts(text, size=50)
    assert len(whole) > 10
    assert cuts(text, size=50, pieces=97) == whole


LONG = "".join(
    f"## Part {i}\n\nParagraph {i} of a long answer.\n\n```\ncode {i}\n```\n\n" for i in range(400)
)


async def test_a_long_answer_is_drawn_as_segments_and_ends_on_screen(harness_process, tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text=LONG, chunk_size=50)])
    proc = harness_process(provider)
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot, timeout=30)
        await pilot.pause(0.1)
        [answer] = app.query(AssistantEntry)
        assert answer.text_shown == LONG
        segments = list(answer.query(MarkdownText))
        assert 1 < len(segments) <= 4, "only the last segments stay mounted"
        assert answer.hidden_segments > 0
        assert segments[-1].source.endswith("code 399\n```\n\n")
        # Every mounted segment is a contiguous piece of the answer, in order.
        shown = "".join(s.source for s in segments)
        assert LONG.endswith(shown)


REAL_TURNS = 2  # of a long session's turns, these are made by runs; the rest written


async def open_long_session(harness_process, turns: int, *more: Any) -> tuple[Any, str]:
    """A stored session of `turns` question/answer pairs, its provider holding `more`
    turns; (the HarnessProcess, its id). Its first turns are real runs (a harness
    process of its own, driven over the protocol); the rest are written in one
    transaction with the store's own mutations, the rows and ledger events a run
    leaves, as bench_live's long session is (running hundreds of turns rebuilds the
    whole context each time: 10 s of the suite's CPU for 300)."""
    real = min(turns, REAL_TURNS)
    proc = harness_process(
        [*(ScriptedTurn(text=f"Answer number {i}.") for i in range(real)), *more]
    )
    conv_id = await proc.session([f"question {i}" for i in range(real)])
    if turns > real:
        from runtime.store.database import Store

        proc.wait_children()  # the seeding harness closed
        store = await Store.open(proc.home / "bastion.sqlite")
        try:
            await store.transact(conv_id, lambda tx: write_turns(tx, conv_id, real, turns))
        finally:
            await store.close()
    return proc, conv_id


def write_turns(tx: Any, conv_id: str, first: int, last: int) -> None:
    """Turns `first`..`last` as a run leaves them: its inbox item, the run, the question
    and the answer."""
    from runtime.model.ids import uuid7
    from runtime.model.records import Entry, InboxItem, Run

    for i in range(first, last):
        now = time.time()
        item_id, run_id, user_id, answer_id = (uuid7() for _ in range(4))
        tx.insert_inbox(InboxItem(item_id, conv_id, "prompt", f"question {i}", "placed", now,
                                  run_id=run_id, entry_id=user_id))  # fmt: skip
        tx.insert_run(Run(run_id, conv_id, item_id, "completed", now, now, revision=3,
                          reason="answered", result_entry_id=answer_id))  # fmt: skip
        tx.add_entry(Entry(user_id, conv_id, 0, "user", "complete", f"question {i}", now,
                           run_id, {"inbox_id": item_id}))  # fmt: skip
        tx.add_entry(Entry(answer_id, conv_id, 0, "assistant", "complete",
                           f"Answer number {i}.", now, run_id))  # fmt: skip


@asynccontextmanager
async def opened(harness_process, turns: int) -> AsyncIterator[tuple[BastionApp, Any]]:
    """The app on a session of `turns` question/answer pairs, its first view drawn."""
    proc, conv_id = await open_long_session(harness_process, turns)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.pause(0.1)
        yield app, pilot


async def test_a_long_session_opens_on_its_end_with_a_window_of_rows(harness_process):
    async with opened(harness_process, 150) as (app, pilot):
        transcript = app.query_one(Transcript)
        rows = list(transcript.query(UserEntry)) + list(transcript.query(AssistantEntry))
        assert 0 < len(rows) <= KEPT_ENTRIES
        last = app.query(AssistantEntry).last()
        assert last.text_shown == "Answer number 149."
        assert transcript.max_scroll_y == 0 or transcript.scroll_y == transcript.max_scroll_y

        # Scrolling to the top mounts earlier rows above, keeping the place.
        before = len(rows)
        first_shown = app.query(UserEntry).first().entry.text
        transcript.scroll_home(animate=False, immediate=True)

        def revealed() -> bool:  # mounted above, then scrolled to keep the place
            users = [w.entry.text for w in app.query(UserEntry)]
            return len(users) > before // 2 and users.index(first_shown) > 0

        await wait_for(revealed, pilot)
        # the row that was at the top stays in view
        await wait_for(lambda: transcript.scroll_y > 0, pilot)


async def test_history_still_lists_every_question_of_a_windowed_session(harness_process):
    proc, conv_id = await open_long_session(harness_process, 60)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        sent = app._sent()
        assert len(sent) == 60 and sent[0] == "question 0"
        assert sum(1 for e in app.view.entries if e.kind == EntryKind.USER) == 60


async def open_long_session_here(tmp_path, turns: int):
    """`open_long_session` with the harness in this process: for the test below, which
    lowers OPENING_ENTRIES (read where the first view is made, the harness's process)."""
    provider = ScriptedProvider([ScriptedTurn(text=f"Answer number {i}.") for i in range(turns)])
    harness, conv_id = await open_driven(tmp_path, provider)
    for i in range(turns):
        item = await harness.submit(conv_id, f"question {i}")
        await harness.wait(item.id, conv_id, poll=0.05)
    return harness, conv_id


@pytest.mark.parametrize("stored", [False, True])  # True: it follows before the first frame
async def test_a_long_session_opens_from_a_view_of_its_end_then_takes_the_whole(
    tmp_path, monkeypatch, stored
):
    """The first view holds only the last OPENING_ENTRIES entries (quick to read, send and
    draw); once it is on screen the app takes the whole view: the history lists every
    question, and scrolling to the top reaches the first, every row in its place."""
    monkeypatch.setattr("runtime.model.views.OPENING_ENTRIES", 20)
    harness, conv_id = await open_long_session_here(tmp_path, 30)  # 60 entries
    app = app_over(harness, conv_id, stored=stored)
    shown: list[int] = []
    real_show = app.show

    async def show(view):
        shown.append(view.earlier)
        await real_show(view)

    monkeypatch.setattr(app, "show", show)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            assert shown[0] == 40
            assert app.query(AssistantEntry).last().text_shown == "Answer number 29."
            await wait_for(lambda: app.view.earlier == 0 and len(app.view.settled) == 60, pilot)
            sent = app._sent()
            assert len(sent) == 30 and sent[0] == "question 0"
            transcript = app.query_one(Transcript)

            def at_the_top() -> bool:
                transcript.scroll_home(animate=False, immediate=True)
                return app.query(UserEntry).first().entry.text == "question 0"

            await wait_for(at_the_top, pilot)
            users = [w.entry.text for w in app.query(UserEntry)]
            assert users == [f"question {i}" for i in range(len(users))]
            assert users[-1] == "question 29"
    finally:
        await harness.close()


class Counting(tuple):  # type: ignore[type-arg]
    """A view's entries that count how many of them are visited."""

    visited = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in super().__iter__():
            Counting.visited += 1
            yield item

    def __reversed__(self):  # type: ignore[no-untyped-def]
        for i in range(len(self) - 1, -1, -1):
            Counting.visited += 1
            yield self[i]


async def test_a_frame_of_streamed_text_visits_the_live_entry_not_the_transcript(
    harness_process,
):
    """Showing a view whose only change is an answer's live text walks none of the other
    entries: a frame's work follows what changed, not the session's length."""
    async with opened(harness_process, 30) as (app, pilot):  # 60 entries
        transcript = app.query_one(Transcript)
        view = replace(app.view, settled=Counting(app.view.settled))
        await transcript.show(view)  # new entries (a new tuple): walked
        assert Counting.visited >= 60
        last = view.settled[-1]
        Counting.visited = 0
        live = MappingProxyType({last.id: LiveText.of(last.text + " And more.")})
        await transcript.show(replace(view, live=live))
        assert Counting.visited <= 1  # the last entry, found from the end
        shown = app.query(AssistantEntry).last()
        await wait_for(lambda: shown.text_shown == "Answer number 29. And more.", pilot)


async def test_new_output_below_shows_while_scrolled_up(harness_process):
    # Enough to stream for about half a second: the marker shows at the first output.
    slow = ScriptedTurn(text="streaming more text. " * 50, chunk_size=20, delay=0.01)
    proc, conv_id = await open_long_session(harness_process, 30, slow)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        transcript = app.query_one(Transcript)
        await wait_for(lambda: transcript.is_anchored, pilot)  # it sits at the bottom
        transcript.scroll_to(y=0, animate=False, immediate=True)
        await wait_for(lambda: not transcript.following, pilot)
        await app.harness.submit(conv_id, "more please")  # (as a second client could)
        marker = app.query_one("#new-output")
        await wait_for(lambda: marker.has_class("-shown"), pilot)
        transcript.scroll_end(animate=False, immediate=True)
        await wait_for(lambda: not marker.has_class("-shown"), pilot)
        await wait_for(lambda: run_settled(app), pilot, timeout=30)


async def test_page_up_and_down_scroll_the_transcript_from_the_prompt(harness_process):
    proc, conv_id = await open_long_session(harness_process, 30)
    app = proc.app(resume=conv_id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        transcript = app.query_one(Transcript)
        await wait_for(lambda: transcript.is_anchored, pilot)  # it sits at the bottom
        assert transcript.scroll_y > 0

        def below() -> float:  # lines between the screen and the bottom
            return transcript.max_scroll_y - transcript.scroll_y

        assert below() == 0
        await pilot.press("pageup")
        await pilot.pause(0.2)  # reaching the top may mount earlier rows above
        up = below()
        assert up > 0
        assert app.focused is app.query_one("#prompt")
        await pilot.press("pagedown")
        await pilot.pause(0.05)
        assert below() < up
