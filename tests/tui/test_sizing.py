"""A transcript widget that grows taller costs one layout, not two (tui.widgets.sizing),
and a widget whose width changes is still measured again at its new width."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.screen import Screen

from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, open_driven, wait_for
from tui.app import BastionApp
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


class _Waiting(ScriptedProvider):
    """Answers "Hello there." only once `go` is set: the answer is open and empty until."""

    def __init__(self) -> None:
        super().__init__([ScriptedTurn(text="")])
        self.go = asyncio.Event()

    async def stream(self, request):
        from runtime.providers.base import TextChunk

        self.requests.append(request)
        await self.go.wait()
        yield TextChunk("Hello there.")


async def test_an_answer_is_laid_out_at_its_width_before_its_first_text(tmp_path):
    """The answer's first segment is laid out (at its width, no lines) while the answer
    is empty, so its first text only makes it taller: one layout, not a new width's
    two, as the text starts to stream."""
    provider = _Waiting()
    harness, conv_id = await open_driven(tmp_path, provider)
    app = BastionApp(harness, conv_id, first_prompt="go")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: bool(app.query(AssistantEntry)), pilot)
            await settled(pilot)
            [answer] = app.query(AssistantEntry)
            segment = answer.query_one(MarkdownText)
            assert segment.has_class("-empty")
            assert segment.outer_size.width > 0 and segment.outer_size.height == 0
            provider.go.set()
            await wait_for(lambda: answer.text_shown == "Hello there.", pilot)
            await settled(pilot)
            assert segment.outer_size.height == 1
            assert "Hello there." in segment.render_line(0).text
    finally:
        await harness.close()
