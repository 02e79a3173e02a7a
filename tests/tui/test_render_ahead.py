"""Markdown is rendered before the frame that shows it: once, at one width.

Before a frame, what it will draw is rendered a piece at a time between keys
(`BastionApp._held`, `Transcript.next_render`), on a
worker thread (`markdown.render_aside`), and held output that is due is rendered
while it is held and then shown as it was rendered. Renders are kept by source and
width (`markdown.rendered`), which the frame then finds. The transcript's scrollbar
is there from the start, so the width text is rendered at never flips.
"""

from __future__ import annotations

import threading

import tui.pacing
import tui.widgets.markdown
import tui.widgets.rich_markdown
from tests.tui.conftest import run_settled, wait_for
from tests.tui.test_app import _hold_output, _type_until, gated_app
from tui.widgets.markdown import MarkdownText, is_rendered, rendered

PARTS = "".join(f"\n\n## Part {i}\n\nParagraph {i}.\n\n```\ncode {i}\n```" for i in range(120))


def _count_renders(monkeypatch, *, ui_only: bool = False) -> list[str]:
    """Every Markdown source rendered from now on, in order: on the UI thread, a worker
    thread, each is kept as it is made (`ui_only`: only
    those parsed on the UI thread)."""
    parsed: list[str] = []
    if not ui_only:
        keep = tui.widgets.markdown._keep

        def kept(key, lines) -> None:
            parsed.append(key[0])
            keep(key, lines)

        monkeypatch.setattr(tui.widgets.markdown, "_keep", kept)
        return parsed
    base = tui.widgets.rich_markdown.LeftMarkdown

    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self, markup: str, dark: bool) -> None:
            if threading.current_thread() is threading.main_thread():
                parsed.append(markup)
            super().__init__(markup, dark)

    monkeypatch.setattr(tui.widgets.rich_markdown, "LeftMarkdown", Counting)
    return parsed


async def test_held_output_is_rendered_before_its_frame_which_renders_nothing(
    harness_process, monkeypatch
):
    async with gated_app(harness_process, PARTS) as gated:
        app, pilot, answer = gated.app, gated.pilot, gated.answer
        _hold_output(app, monkeypatch)
        gated.more.set()
        whole = "first" + PARTS
        await wait_for(lambda: str(answer._read) == whole, pilot, timeout=30)
        parsed = _count_renders(monkeypatch)
        monkeypatch.setattr(tui.pacing, "MAX_HOLD", 0.0)  # due: rendered now, between keys
        width = answer._text_width()
        text = answer._read  # the held view's text, read ahead

        def ready() -> bool:
            sources = answer._sources(*answer._pieces(text, len(answer._shown)))
            return all(is_rendered(app, s, width) for s in sources)

        await wait_for(ready, pilot, timeout=30)
        assert parsed, "the due output was rendered while it was held"
        before = len(parsed)
        assert answer.text_shown == "first"
        await _type_until(app, pilot, lambda: answer.text_shown == whole)
        await pilot.pause(0.1)
        assert parsed[before:] == []  # the frame that showed it only laid it out
        shown = [s.source for s in answer.query(MarkdownText)]
        assert whole.endswith("".join(shown)) and shown[-1].endswith("code 119\n```")
        gated.end.set()
        await _type_until(app, pilot, lambda: run_settled(app))


async def test_text_keeps_its_width_and_segments_as_the_answer_outgrows_the_screen(
    harness_process,
):
    async with gated_app(harness_process, PARTS) as gated:
        app, pilot, answer = gated.app, gated.pilot, gated.answer
        first = answer.query_one(MarkdownText)
        await wait_for(lambda: first.content_size.width > 0, pilot)
        width = first.content_size.width  # a short transcript: no scrollbar yet
        gated.more.set()
        gated.end.set()
        await wait_for(lambda: run_settled(app), pilot, timeout=30)
        await pilot.pause(0.1)
        segments = list(answer.query(MarkdownText))
        assert answer.hidden_segments > 0  # it outgrew the screen, and jumped ahead
        assert {s.content_size.width for s in segments} == {width}
        # Each segment's lines are the ones rendered once for its source and width.
        for segment in segments:
            lines = rendered(app, segment.source, width)
            assert segment.render()._lines_at(width) is lines


SAMPLE = """# Heading

Some **bold**, *italic*, `code` and a [link](https://example.com).

- one
- two, with `code`

1. first
2. second

> a quote

| name | value |
|------|-------|
| a    | 1     |

```python
def f(x: int) -> int:
    return x * 2  # a comment
```
"""


async def check_aside_draws_what_the_app_would() -> None:
    """`render_aside` (on a worker thread) keeps the lines `rendered`
    (the app's console) makes, in a dark and a light theme, at two widths."""
    from textual.app import App

    import tui.widgets.markdown as markdown

    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            await pilot.pause()  # the theme's variables are made on the next refresh
            for width in (40, 96):
                markdown._RENDERS.clear()
                own = rendered(app, SAMPLE, width)
                markdown._RENDERS.clear()
                await markdown.render_aside(app, SAMPLE, width)
                assert is_rendered(app, SAMPLE, width)
                aside = rendered(app, SAMPLE, width)  # the kept one
                assert aside is not own
                assert aside == own
                assert any(seg.style and seg.style.bgcolor for line in own for seg in line)


async def test_a_render_aside_draws_exactly_what_the_frame_would(tmp_path):
    await check_aside_draws_what_the_app_would()  # on a worker thread, its own console


async def test_an_answer_that_ends_while_held_is_rendered_off_the_ui_thread(
    harness_process, monkeypatch
):
    """Output held while the user types is rendered aside before it is shown, and that
    includes an answer whose stream ended meanwhile (its last text comes settled, not
    live): the UI thread parses no Markdown for it."""
    async with gated_app(harness_process, PARTS) as gated:
        app, pilot, answer = gated.app, gated.pilot, gated.answer
        _hold_output(app, monkeypatch)
        on_ui = _count_renders(monkeypatch, ui_only=True)
        everything = _count_renders(monkeypatch)
        gated.more.set()
        gated.end.set()
        whole = "first" + PARTS
        await _type_until(app, pilot, lambda: answer.text_shown == whole and not app.view.live)
        await pilot.pause(0.1)
        assert everything, "the rest of the answer was rendered"
        assert on_ui == []
