"""Markdown drawn as one widget: Rich's renderer, coloured from the Textual theme.

Textual's `Markdown` widget mounts a widget per block (a heading, a paragraph,
each list item, each fence), so one answer of a few blocks costs a dozen
widgets to style and lay out, and a long session thousands. A `MarkdownText`
is a single `Static`: its text is rendered to lines by Rich once per width
(Textual caches a widget's lines until its size or style changes), which costs
about a fifth of the same answer as a `Markdown` widget.

Colours come from the app's theme: the `markdown-h*` variables Textual's own
Markdown uses for headings, `$text-accent` on `$accent-muted` for inline code,
`$text-accent` for links, `$surface` (`$panel` on a light theme) under code blocks, and a Pygments style
picked by the theme's darkness for the code itself. A theme switch recolours
every answer (Textual re-renders each widget on it).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.theme import Theme as RichTheme
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual
from textual.widgets import Static

from tui.textual_compat import LaidOutOnce

if TYPE_CHECKING:
    from textual.app import App
    from textual.css.styles import RulesMap
    from textual.selection import Selection
    from textual.style import Style
    from textual.visual import RenderOptions


__all__ = [
    "MarkdownText",
    "headroom_for",
    "is_rendered",
    "markdown_theme",
    "render_aside",
    "rendered",
    "warm",
]


class _Themed(Visual):
    """Markdown `source` drawn in the app's Markdown theme, as a Textual Visual.

    Its lines come from `rendered` (so text rendered ahead of its frame costs the
    frame nothing), and the lines of the last width are kept: Textual asks a widget
    for its height and then for its lines on every layout, and a growing answer is
    laid out on every frame, so the second costs nothing. The styled strips are kept
    too, so a redraw that changed nothing in the text (a scroll, a neighbour's
    update) only copies them.
    """

    def __init__(self, source: str, app: App[Any], headroom: int = 1) -> None:
        self.source = source
        self.app = app
        self.headroom = headroom  # the height is a multiple of this (see MarkdownText)
        self._lines: tuple[int, list[list[Segment]]] | None = None  # width, lines
        self._strips: tuple[int, RichStyle, list[Strip]] | None = None  # width, style, strips

    def _lines_at(self, width: int) -> list[list[Segment]]:
        if self._lines is None or self._lines[0] != width:
            self._lines = (width, rendered(self.app, self.source, width))
        return self._lines[1]

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return padded(len(self._lines_at(width)), self.headroom)

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        """The lines with the widget's base style under each segment's own, as Textual
        draws any Rich renderable."""
        base = style.rich_style
        kept = self._strips
        if kept is None or kept[0] != width or kept[1] != base:
            add = base.__add__
            strips = [
                Strip([Segment(text, add(seg_style), None) for text, seg_style, _ in line])
                for line in self._lines_at(width)
            ]
            kept = self._strips = (width, base, strips)
        strips = kept[2][:height] if height is not None else kept[2]
        # Each cell's place in the text, as Textual's own text widgets mark theirs: the
        # mouse selects by it (Strip caches the marked copy per strip).
        strips = [strip.apply_offsets(0, y) for y, strip in enumerate(strips)]
        if options.selection is not None and options.selection_style is not None:
            strips = _highlight(strips, options.selection, options.selection_style)
        return strips

    def text(self, width: int) -> str:
        """The lines as shown at `width`, without their trailing blanks: what a mouse
        selection over them copies."""
        return "\n".join(
            "".join(text for text, _, _ in line).rstrip() for line in self._lines_at(width)
        )


#: Lines at a time the open segment of a streaming answer grows by (`MarkdownText.grow`),
#: by the characters the answer has so far: none for a short one (no blank lines below
#: a short answer), a few once it fills a screen. At 400 characters a second a long
#: answer takes 2-3 lines per frame of 5 a second; measured with bench_live.py --only
#: cpu, the app's CPU per 15 s went from 2.2 s to 1.5 s with this and 5 frames a second.
HEADROOM = ((500, 1), (1000, 4), (None, 8))


def headroom_for(chars: int) -> int:
    """The headroom of the open segment of a streaming answer `chars` long."""
    for limit, lines in HEADROOM:
        if limit is None or chars < limit:
            return lines
    return 1


def padded(lines: int, headroom: int) -> int:
    """`lines` rounded up to a multiple of `headroom` (the blank lines below are drawn
    by Textual, which pads a widget's lines to its height)."""
    return -(-lines // headroom) * headroom


def _highlight(strips: list[Strip], selection: Selection, style: Style) -> list[Strip]:
    """`strips` with the selected cells in the selection's style."""
    out = []
    rich = style.rich_style
    for y, strip in enumerate(strips):
        span = selection.get_span(y)
        if span is None:
            out.append(strip)
            continue
        start, end = span
        end = strip.cell_length if end == -1 else min(end, strip.cell_length)
        if end <= start:
            out.append(strip)
            continue
        before, chosen, after = strip.divide([start, end, strip.cell_length])
        out.append(Strip.join([before, chosen.apply_style(rich), after]))
    return out


_THEMES: dict[tuple[str, int], RichTheme] = {}
KEPT_RENDERS = 24  # Markdown renders kept by source, width and theme (see `rendered`)
_RENDERS: OrderedDict[tuple[str, int, int, bool], list[list[Segment]]] = OrderedDict()


def rendered(app: App[Any], source: str, width: int) -> list[list[Segment]]:
    """`source` rendered to lines `width` cells wide in the app's Markdown theme. The
    last KEPT_RENDERS are kept: an answer's segments are rendered ahead of the frame
    that shows them (`render_aside`), and that frame then finds them."""
    key = _render_key(app, source, width)
    lines = _RENDERS.get(key)
    if lines is not None:
        _RENDERS.move_to_end(key)
        return lines
    lines = _render(app.console, *_job(app, source, width))
    _keep(key, lines)
    return lines


async def render_aside(app: App[Any], source: str, width: int) -> None:
    """Render `source` as `rendered` would, off the UI thread, and keep it.

    A render takes 5-30 ms here (Rich's parser and layout, Pygments for fences), and
    on the UI thread a key typed meanwhile waits for all of it. It goes to a worker
    thread, where it runs in the interpreter's switch intervals (5 ms) and the key is
    handled and echoed between them, with a console of its own (a console's theme
    stack is not for two threads), made like the app's and given the same options.
    Only a segment that changed is rendered again (answers are cut into segments and
    the settled ones kept: `_RENDERS`), and of it only the blocks that changed
    (`_render_blocks`).
    """
    key = _render_key(app, source, width)
    if key in _RENDERS:
        return
    job = _job(app, source, width)
    lines = await asyncio.to_thread(_render_aside, _aside_console(app), *job)
    _keep(key, lines)


def _job(app: App[Any], source: str, width: int) -> tuple[Any, RichTheme, str, bool]:
    """What a render of `source` at `width` needs from the app (read on its thread)."""
    options = app.console_options.update_width(width).update(highlight=False, height=None)
    return options, markdown_theme(app), source, app.current_theme.dark


def _render(
    console: Console, options: Any, theme: RichTheme, source: str, dark: bool
) -> list[list[Segment]]:
    from tui.widgets.rich_markdown import render_lines  # the parser loads with an answer

    return render_lines(console, options, theme, source, dark)


#: Blocks of streamed Markdown rendered (by source, width and theme), kept so that
#: each is rendered once (see `_render_blocks`).
KEPT_BLOCKS = 64
_BLOCKS: OrderedDict[tuple[str, int, int, bool], list[list[Segment]]] = OrderedDict()
_BLOCKS_LOCK = threading.Lock()  # (rendered on a worker thread; tests on the UI thread)


def _render_blocks(
    console: Console, options: Any, theme: RichTheme, source: str, dark: bool
) -> list[list[Segment]]:
    """`source`'s lines as `_render` gives them, made from those of each of its blocks
    (`segments.blocks`), each rendered once and kept, with a blank line between them
    (Rich's between two blocks). The open segment of a streaming answer is rendered
    again on every frame, and all its blocks but the last are the ones the frame
    before rendered. (Only there: a text rendered once costs more by blocks, each
    a parse of its own.)"""
    from tui.widgets.rich_markdown import render_lines
    from tui.widgets.segments import blocks

    parts = blocks(source)
    if len(parts) == 1:
        return render_lines(console, options, theme, source, dark)
    lines: list[list[Segment]] = []
    for index, block in enumerate(parts):
        key = (block, options.max_width, id(theme), dark)
        with _BLOCKS_LOCK:
            kept = _BLOCKS.get(key)
            if kept is not None:
                _BLOCKS.move_to_end(key)
        if kept is None:
            kept = render_lines(console, options, theme, block, dark)
            with _BLOCKS_LOCK:
                _BLOCKS[key] = kept
                if len(_BLOCKS) > KEPT_BLOCKS:
                    _BLOCKS.popitem(last=False)
        if index:
            lines.append([])
        lines.extend(kept)
    return lines


_ASIDE_LOCK = threading.Lock()  # one render at a time on the aside console
_aside: tuple[object, Console] | None = None  # (the app's console, the aside one)


def _aside_console(app: App[Any]) -> Console:
    """A console for worker threads, like the app's in what a render reads of it."""
    from tui.widgets.rich_markdown import aside_console

    global _aside
    own = app.console
    if _aside is None or _aside[0] is not own:
        _aside = (own, aside_console(own.color_system))
    return _aside[1]


def _render_aside(
    console: Console, options: Any, theme: RichTheme, source: str, dark: bool
) -> list[list[Segment]]:
    with _ASIDE_LOCK:
        return _render_blocks(console, options, theme, source, dark)


def _keep(key: tuple[str, int, int, bool], lines: list[list[Segment]]) -> None:
    _RENDERS[key] = lines
    _RENDERS.move_to_end(key)
    if len(_RENDERS) > KEPT_RENDERS:
        _RENDERS.popitem(last=False)


def is_rendered(app: App[Any], source: str, width: int) -> bool:
    """`rendered(app, source, width)` is kept: asking for it costs nothing."""
    return _render_key(app, source, width) in _RENDERS


def _render_key(app: App[Any], source: str, width: int) -> tuple[str, int, int, bool]:
    # The theme by identity: themes live in _THEMES, so an id stays theirs.
    return (source, width, id(markdown_theme(app)), app.current_theme.dark)


_warmed = False


def warm() -> None:
    """Render a small answer with a fenced block once, off screen: the parser, Rich's
    Markdown and Syntax, Pygments and its Python lexer load now rather than in the
    first frames of the first answer. (Python: the language of the fences a coding
    agent writes most; another language's lexer still loads on first use.) Once per
    process: `preload` and the app's settling both ask for it."""
    global _warmed
    if _warmed:
        return
    from tui.widgets.rich_markdown import aside_console, render_lines

    console = aside_console("truecolor")
    sample = "# Warm\n\nSome **text**, `code`.\n\n- a\n\n```python\ndef f(x):\n    return x\n```\n"
    render_lines(console, console.options.update_width(80), RichTheme({}), sample, True)
    _warmed = True


def markdown_theme(app: App[Any]) -> RichTheme:
    """Rich's `markdown.*` styles from `app`'s current theme variables (cached per theme)."""
    variables = app.theme_variables
    key = (app.theme, id(variables))
    theme = _THEMES.get(key)
    if theme is None:
        theme = _THEMES[key] = _rich_theme(variables, app.current_theme.dark)
    return theme


def _rich_theme(v: dict[str, str], dark: bool) -> RichTheme:
    def color(name: str, fallback: str = "default") -> str:
        value = v.get(name, "")
        return value if value.startswith("#") and len(value) in (7, 9) else fallback

    def hex6(value: str) -> str:
        return value[:7] if value.startswith("#") else value

    styles: dict[str, str] = {}
    for level in range(1, 7):
        text_style = v.get(f"markdown-h{level}-text-style", "bold")
        words = " ".join(w for w in text_style.split() if w in ("bold", "italic", "underline"))
        styles[f"markdown.h{level}"] = f"{words} {hex6(color(f'markdown-h{level}-color'))}".strip()
    code_bg = hex6(color("surface" if dark else "panel"))
    styles.update(
        {
            "markdown.code": f"{hex6(color('text-accent'))} on {hex6(color('accent-muted'))}",
            "markdown.code_block": f"on {code_bg}",
            "markdown.block_quote": hex6(color("foreground-muted")),
            "markdown.link": hex6(color("text-accent", "blue")),
            "markdown.link_url": f"underline {hex6(color('text-accent'))}",
            "markdown.item.bullet": f"bold {hex6(color('text-primary'))}",
            "markdown.item.number": hex6(color("text-primary", "default")),
            "markdown.list": hex6(color("text-primary", "default")),
            "markdown.hr": hex6(color("foreground-muted")),
            "markdown.table.border": hex6(color("foreground-muted")),
            "markdown.table.header": f"bold {hex6(color('text-primary'))}",
        }
    )
    return RichTheme(styles, inherit=True)


class MarkdownText(Static, LaidOutOnce):
    """Markdown source, drawn by Rich as one widget; `source` is what it shows."""

    DEFAULT_CSS = """
    MarkdownText {
        width: 1fr;
        height: auto;
        padding: 0 1;
    }
    """

    def __init__(self, source: str = "", *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.source = source
        self.headroom = 1  # lines at a time the height grows by (see `grow`)
        self._drawn: tuple[str, RichTheme, _Themed] | None = None  # source, theme, visual

    def render(self) -> Any:
        if not self.source:
            return ""
        theme = markdown_theme(self.app)
        drawn = self._drawn
        if (
            drawn is None
            or drawn[0] is not self.source
            or drawn[1] is not theme
            or drawn[2].headroom != self.headroom
        ):
            visual = _Themed(self.source, self.app, self.headroom)
            drawn = self._drawn = (self.source, theme, visual)
        return drawn[2]

    def grow(self, headroom: int) -> None:
        """Let the height grow `headroom` lines at a time (1: as the text needs), blank
        below the text until it fills them. Each line the text takes past the last lays
        the screen out again and repaints all of it (the transcript scrolls by a line):
        the open segment of a long streaming answer (`headroom_for`) is laid out a few
        times a second instead of on nearly every frame. When it stops growing (1)
        the blank lines go."""
        if headroom != self.headroom:
            self.headroom = headroom
            self.clear_cached_dimensions()
            self.refresh(layout=True)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The text a mouse selection covers, as the lines are shown (Rich's Markdown:
        emphasis markers gone, lists bulleted, wrapped at the widget's width)."""
        drawn = self._drawn
        if not self.source or drawn is None:
            return None
        return selection.extract(drawn[2].text(self.content_size.width)), "\n"

    def set_source(self, source: str) -> None:
        """Show `source` (re-rendered at the next refresh; the layout follows its height)."""
        if source == self.source:
            return
        changed = self._changed_lines(source)
        self.source = source
        if changed is not None:
            # The text grew within its last line, or into the blank lines kept below
            # it (most deltas of a stream): only the lines from the first that changed
            # are drawn again, not the whole screen laid out.
            first, height = changed
            self.refresh(Region(0, first, self.content_size.width, height - first))
        else:
            self.clear_cached_dimensions()
            self.refresh(layout=True)

    def _changed_lines(self, source: str) -> tuple[int, int] | None:
        """When `source`, already rendered at the width last laid out (the frame that
        shows a streamed answer renders it ahead), takes as many lines as what is
        shown: (the first line it draws otherwise, the height). Else None."""
        drawn = self._drawn
        lines = drawn[2]._lines if drawn is not None and drawn[0] is self.source else None
        if lines is None or not self.source or not source:
            return None
        width, shown = lines
        if not is_rendered(self.app, source, width):
            return None
        now = rendered(self.app, source, width)
        height = padded(len(now), self.headroom)
        if height != padded(len(shown), self.headroom):
            return None
        first = 0
        for was, line in zip(shown, now, strict=False):  # (kept blocks: the same lines)
            if was is not line and was != line:
                break
            first += 1
        return first, height
