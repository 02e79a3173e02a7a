"""Rich's Markdown with left-aligned headings and our code blocks (imported with the
first answer drawn, not at start-up: it brings the Markdown parser and Pygments)."""

from __future__ import annotations

import functools
import io
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import CodeBlock, Heading
from rich.markdown import Markdown as RichMarkdown
from rich.syntax import Syntax

from runtime import visible

if TYPE_CHECKING:
    from pygments.lexer import Lexer
    from rich.segment import Segment
    from rich.theme import Theme

__all__ = ["CODE_THEMES", "LeftMarkdown", "aside_console", "render_lines"]

CODE_THEMES = {True: "monokai", False: "friendly"}  # Pygments styles, by theme darkness


class _LeftHeading(Heading):
    """Headings at the left margin, as in Textual's Markdown (Rich centres `#`)."""

    LEVEL_ALIGN: ClassVar[dict[str, Any]] = dict.fromkeys(
        ("h1", "h2", "h3", "h4", "h5", "h6"), "left"
    )


class _Code(CodeBlock):
    """A fenced block: highlighted, wrapped, on the code background, one cell of padding."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        style = console.get_style("markdown.code_block")
        background = style.bgcolor.name if style.bgcolor is not None else None
        yield Syntax(
            str(self.text).rstrip(),
            _lexer(self.lexer_name),
            theme=self.theme,
            word_wrap=True,
            padding=(1, 2),
            background_color=background,
        )


@functools.cache
def _lexer(name: str) -> Lexer:
    """The Pygments lexer for a fence's language, made once per name as Rich's `Syntax`
    makes it (else "text"). Looking one up by name scans the installed packages'
    entry points for plugin lexers, and a streamed answer's open segment is rendered
    again on every frame: that lookup was a fifth of each render of a code block."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    options: dict[str, Any] = {"stripnl": False, "ensurenl": True, "tabsize": 4}  # Syntax.tab_size
    try:
        return get_lexer_by_name(name, **options)
    except ClassNotFound:
        return get_lexer_by_name("text", **options)


class LeftMarkdown(RichMarkdown):
    """Markdown as the transcript draws it (`dark`: the code theme for a dark screen)."""

    elements: ClassVar[dict[str, Any]] = {
        **RichMarkdown.elements,
        "heading_open": _LeftHeading,
        "fence": _Code,
        "code_block": _Code,
    }

    def __init__(self, markup: str, dark: bool) -> None:
        super().__init__(markup, code_theme=CODE_THEMES[dark], hyperlinks=False)


def render_lines(
    console: Console, options: ConsoleOptions, theme: Theme, source: str, dark: bool
) -> list[list[Segment]]:
    """`source` rendered to lines by `console` with `options` in the Markdown `theme`,
    its control characters made visible (`runtime.visible`: Rich passes ESC through)."""
    with console.use_theme(theme):
        markdown = LeftMarkdown(visible(source), dark)
        return console.render_lines(markdown, options, pad=False, new_lines=False)


def aside_console(color_system: str | None) -> Console:
    """A console to render with off the app's thread (a console's theme stack is not for
    two threads), like the app's in what a render reads of it: its colour system."""
    return Console(
        file=io.StringIO(),
        color_system=color_system,  # type: ignore[arg-type]
        force_terminal=True,
        legacy_windows=False,
        markup=False,
        highlight=False,
        emoji=False,
    )
