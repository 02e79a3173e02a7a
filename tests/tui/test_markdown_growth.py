"""A growing Markdown segment: text added within its last line repaints it without a
layout of the screen, and the new text is what it draws; a new line lays it out
again at its new height. Also the inbox strip, shown on every frame, asks for
nothing when its items did not change."""

from __future__ import annotations

from textual.app import App, ComposeResult

from tui.widgets.markdown import MarkdownText, rendered


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
