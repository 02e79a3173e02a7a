"""A transcript widget that grows taller costs one layout, not two (tui.textual_compat.LaidOutOnce),
and a widget whose width changes is still measured again at its new width."""

from __future__ import annotations

import threading

from textual.app import App, ComposeResult
from textual.screen import Screen

from tests.tui.conftest import SIZE, wait_for
from tui.widgets.entries import AssistantEntry
from tui.widgets.markdown import MarkdownText
from tui.widgets.transcript import Transcript

PARAGRAPH = "A paragraph of the answer, long enough to wrap at a narrow width. " * 3


class Holder(App[None]):
    def compose(self) -> ComposeResult:
        with Transcript():
            yield MarkdownText(PARAGRAPH)


async def settled(pilot) -> None:
    for _ in range(5):
        await pilot.pause()


async def test_growing_answer_text_costs_one_layout(monkeypatch):
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        await settled(pilot)
        text = app.query_one(MarkdownText)
        height = text.outer_size.height
        layouts = count_layouts(monkeypatch)
        text.set_source(text.source + "\n\nAnother paragraph, and another line.")
        await settled(pilot)
        assert text.outer_size.height == height + 2
        assert len(layouts) == 1  # Textual's own second layout would make it 2


def count_layouts(monkeypatch) -> list[int]:
    layouts: list[int] = []
    real = Screen._refresh_layout

    def counted(screen, *args, **kwargs):
        layouts.append(1)
        return real(screen, *args, **kwargs)

    monkeypatch.setattr(Screen, "_refresh_layout", counted)
    return layouts


async def test_a_new_widget_costs_one_layout(monkeypatch):
    """A widget mounted into the transcript is measured at its width by the layout that
    places it: Textual's second layout (its first size, given as a reactive) is not
    needed, and would redraw the screen again."""
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        await settled(pilot)
        layouts = count_layouts(monkeypatch)
        added = MarkdownText("A new segment of the answer.\n\n- one\n- two")
        await app.query_one(Transcript).mount(added)
        await settled(pilot)
        assert added.outer_size.height == 4
        assert "A new segment" in added.render_line(0).text
        assert len(layouts) == 1


async def test_the_layout_that_first_outgrows_the_screen_shows_its_end(monkeypatch):
    """The transcript anchors in the layout in which its entries first outgrow the
    screen, so that one frame shows the end: anchoring after it scrolled, and so drew
    the whole transcript again."""
    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        await settled(pilot)
        transcript = app.query_one(Transcript)
        assert not transcript.is_anchored  # short: it sits at the top
        layouts = count_layouts(monkeypatch)
        text = app.query_one(MarkdownText)
        text.set_source("\n\n".join(f"Paragraph {i}." for i in range(30)))
        await settled(pilot)
        assert transcript.is_anchored
        assert transcript.max_scroll_y > 0 and transcript.scroll_y == transcript.max_scroll_y
        assert len(layouts) == 1


async def test_a_new_width_is_measured_again():
    app = Holder()
    async with app.run_test(size=(120, 20)) as pilot:
        await settled(pilot)
        text = app.query_one(MarkdownText)
        wide = text.outer_size.height
        await pilot.resize_terminal(40, 20)
        await settled(pilot)
        width = text.content_size.width
        assert text.outer_size.height == text.get_content_height(text.size, text.size, width)
        assert text.outer_size.height > wide


async def test_an_answer_is_laid_out_at_its_width_before_its_first_text(harness_process):
    """The answer's first segment is laid out (at its width, no lines) while the answer
    is empty, so its first text only makes it taller: one layout, not a new width's
    two, as the text starts to stream."""
    go = threading.Event()  # the model's first text comes once it is set
    proc = harness_process([{"text": "Hello there.", "chunk_size": 100, "holds": {0: go}}])
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(app.query(AssistantEntry)), pilot)
        await settled(pilot)
        [answer] = app.query(AssistantEntry)
        segment = answer.query_one(MarkdownText)
        assert segment.has_class("-empty")
        assert segment.outer_size.width > 0 and segment.outer_size.height == 0
        go.set()
        await wait_for(lambda: answer.text_shown == "Hello there.", pilot)
        await settled(pilot)
        assert segment.outer_size.height == 1
        assert "Hello there." in segment.render_line(0).text
