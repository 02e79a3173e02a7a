"""A growing Markdown segment: text added within its last line (or within the blank
lines of its headroom) repaints it without a layout of the screen, and the new text is
what it draws; a new line past them lays it out again at its new height. Also the inbox strip, shown on every frame, asks for
nothing when its items did not change."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.geometry import Region

from tui.widgets.markdown import HEADROOM, MarkdownText, headroom_for, rendered


class _One(App[None]):
    def compose(self) -> ComposeResult:
        yield MarkdownText("Hello")


def _line(widget: MarkdownText, y: int) -> str:
    return widget.render_line(y).text


async def test_text_within_the_last_line_repaints_it_without_a_layout() -> None:
    app = _One()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause()
        text = app.query_one(MarkdownText)
        width = text.content_size.width
        assert text.size.height == 1 and "Hello" in _line(text, 0)
        rendered(app, "Hello world", width)  # as the frame's render ahead leaves it
        text.set_source("Hello world")
        assert not text._layout_required  # only this widget is drawn again
        await pilot.pause()
        assert text.size.height == 1 and "Hello world" in _line(text, 0)
        assert "Hello world" in app.export_screenshot().replace("&#160;", " ")


async def test_a_new_line_lays_the_segment_out_at_its_new_height() -> None:
    app = _One()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause()
        text = app.query_one(MarkdownText)
        source = "Hello\n\nA second paragraph."
        rendered(app, source, text.content_size.width)
        text.set_source(source)
        assert text._layout_required
        await pilot.pause()
        assert text.size.height == 3
        assert "A second paragraph." in _line(text, 2)


async def test_text_not_rendered_ahead_is_laid_out() -> None:
    """Without a render at the width laid out, the height is not known: a layout."""
    app = _One()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause()
        text = app.query_one(MarkdownText)
        text.set_source("Hello there")
        assert text._layout_required
        await pilot.pause()
        assert "Hello there" in _line(text, 0)


class _Strip(App[None]):
    def compose(self) -> ComposeResult:
        from tui.widgets.inbox import InboxStrip

        yield InboxStrip()


async def test_a_segment_with_headroom_lays_out_only_when_its_text_passes_it() -> None:
    """Headroom 4: the height is a multiple of 4 lines, blank below the text; text that
    still fits repaints the segment alone, text past it lays it out; headroom 1 again
    (the stream ended) takes the blank lines away."""
    app = _One()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        text = app.query_one(MarkdownText)
        width = text.content_size.width
        text.grow(4)
        await pilot.pause()
        assert text.size.height == 4 and "Hello" in _line(text, 0) and not _line(text, 3).strip()
        two = "Hello\n\nSecond."  # three lines: within the four
        rendered(app, two, width)
        text.set_source(two)
        assert not text._layout_required
        await pilot.pause()
        assert text.size.height == 4 and "Second." in _line(text, 2)
        three = two + "\n\nThird."  # five lines: past them
        rendered(app, three, width)
        text.set_source(three)
        assert text._layout_required
        await pilot.pause()
        assert text.size.height == 8 and "Third." in _line(text, 4)
        text.grow(1)
        await pilot.pause()
        assert text.size.height == 5


def test_only_a_long_answer_gets_headroom() -> None:
    short_limit = HEADROOM[0][0]
    assert short_limit is not None
    assert headroom_for(0) == headroom_for(short_limit - 1) == 1  # no blank lines below
    assert headroom_for(10**6) == HEADROOM[-1][1] > 1
    assert [headroom_for(n) for n in range(0, 5000, 50)] == sorted(
        headroom_for(n) for n in range(0, 5000, 50)
    )


async def test_the_inbox_strip_asks_for_no_layout_when_its_items_did_not_change() -> None:
    from runtime.model.records import Conversation, InboxItem
    from runtime.model.views import ConversationView
    from tui.widgets.inbox import InboxStrip

    app = _Strip()
    async with app.run_test(size=(60, 10)) as pilot:
        strip = app.query_one(InboxStrip)
        view = ConversationView(Conversation("c", "", "/", {}, 0.0, 0.0), 0)
        strip.show(view)
        await pilot.pause()
        strip.show(view)  # every frame shows it the view, most often unchanged
        assert not strip._layout_required
        item = InboxItem("i", "c", "follow_up", "run the tests", "queued", 0.0)
        strip.show(ConversationView(view.conversation, 1, inbox=(item,)))
        await pilot.pause()
        assert strip.shown and "run the tests" in str(strip.render())
        strip.show(view)
        await pilot.pause()
        assert not strip.shown


async def test_a_long_streaming_answer_keeps_headroom_until_it_ends(
    harness_process, tmp_path
) -> None:
    """In the app: while a long answer streams its open segment is laid out in steps of
    the last HEADROOM (blank lines below its text); once the run ends (Esc) the segment
    is exactly as tall as its text."""
    from tests.tui.conftest import (
        SIZE,
        HangingProvider,
        run_settled,
        wait_for,
    )
    from tui.widgets.entries import AssistantEntry

    paragraph = "A line of the answer that says a little more about what was done. " * 3
    answer = "\n\n".join(f"{i}. {paragraph}" for i in range(12))  # ~2,500 characters
    provider = HangingProvider(answer)
    proc = harness_process(provider)
    app = proc.app(first_prompt="go")
    step = headroom_for(len(answer))
    assert step > 1
    async with app.run_test(size=SIZE) as pilot:

        def shown() -> AssistantEntry | None:
            found = list(app.query(AssistantEntry))
            return found[0] if found and found[0].text_shown == answer else None

        await wait_for(lambda: shown() is not None, pilot)
        entry = shown()
        assert entry is not None
        segment = entry.query(MarkdownText).last()
        await wait_for(lambda: segment.size.height > 0, pilot)  # laid out (if just mounted)
        lines = len(rendered(app, segment.source, segment.content_size.width))
        assert lines % step  # (so the blank lines show)
        await wait_for(lambda: segment.size.height % step == 0, pilot)
        assert lines < segment.size.height < lines + step
        await pilot.press("escape")
        await wait_for(lambda: run_settled(app), pilot)
        await wait_for(lambda: segment.size.height == lines, pilot)


async def test_text_grown_within_its_height_repaints_from_its_first_changed_line() -> None:
    """Only the lines from the first one the new text draws otherwise are drawn again;
    the segment then shows what the whole new text renders to, line for line."""
    app = _One()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        text = app.query_one(MarkdownText)
        width = text.content_size.width
        text.grow(8)
        before = "Hello\n\nA paragraph.\n\nThe last one"
        rendered(app, before, width)
        text.set_source(before)
        await pilot.pause()
        assert text.size.height == 8
        source = before + " goes on."
        rendered(app, source, width)
        asked = set(text._repaint_regions)  # (what the layout before left to repaint)
        text.set_source(source)
        assert not text._layout_required
        assert text._repaint_regions - asked == {Region(1, 4, width, 4)}  # from line 4
        await pilot.pause()
        fresh = MarkdownText(source)
        fresh.grow(8)
        await app.mount(fresh)
        await pilot.pause()
        assert [_line(text, y) for y in range(8)] == [_line(fresh, y) for y in range(8)]
        assert "The last one goes on." in _line(text, 4)
