"""A transcript widget that grows taller costs one layout, not two (tui.widgets.sizing),
and a widget whose width changes is still measured again at its new width."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.screen import Screen

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
    layouts: list[int] = []
    real = Screen._refresh_layout

    def counted(screen, *args, **kwargs):
        layouts.append(1)
        return real(screen, *args, **kwargs)

    app = Holder()
    async with app.run_test(size=(80, 20)) as pilot:
        await settled(pilot)
        text = app.query_one(MarkdownText)
        height = text.outer_size.height
        monkeypatch.setattr(Screen, "_refresh_layout", counted)
        text.set_source(text.source + "\n\nAnother paragraph, and another line.")
        await settled(pilot)
        assert text.outer_size.height == height + 2
        assert len(layouts) == 1  # Textual's own second layout would make it 2


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
