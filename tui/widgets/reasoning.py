"""An answer's reasoning: one folded line as it streams, all of it on a click.

Folded (the default), the line says the model is thinking and how much it has
thought (`▸ thinking… 1.2k chars` while it streams, `▸ thought · 1.2k chars`
after); a click unfolds the text (muted) and folds it again. It shows nothing for
an answer without reasoning. The text comes from the view: the live reasoning of
an answer still streaming, else the finished entry's `reasoning`.
"""

from __future__ import annotations

from textual.content import Content
from textual.reactive import var
from textual.widgets import Static

from tui.markup import visible
from tui.usage import count

__all__ = ["ReasoningFold"]

MAX_SHOWN = 64 * 1024  # characters of reasoning drawn unfolded (its end)


class ReasoningFold(Static):
    DEFAULT_CSS = """
    ReasoningFold {
        padding: 0 1;
        color: $text-muted;
        display: none;
    }
    ReasoningFold.-shown {
        display: block;
    }
    """

    expanded = var(False, toggle_class="-expanded")

    def __init__(self) -> None:
        super().__init__()
        self._text = ""
        self._streaming = False

    def show(self, text: str, streaming: bool) -> None:
        if (text, streaming) == (self._text, self._streaming):
            return
        self._text, self._streaming = text, streaming
        self.set_class(bool(text), "-shown")
        self._draw()

    def _draw(self) -> None:
        if not self._text:
            return
        size = f"{count(len(self._text))} chars"
        verb = "thinking…" if self._streaming else "thought"
        glyph = "▾" if self.expanded else "▸"
        head = Content.from_markup(
            f"[i]{glyph} {verb}[/i] [dim]· {size} · click to {'fold' if self.expanded else 'show'}[/]"
        )
        if not self.expanded:
            self.update(head)
            return
        shown = self._text[-MAX_SHOWN:]
        cut = (
            Content(f"[… {count(len(self._text) - len(shown))} chars before]\n")
            if len(shown) < len(self._text)
            else Content("")
        )
        self.update(Content("\n").join([head, cut + Content(visible(shown.strip()))]))

    def watch_expanded(self) -> None:
        self._draw()

    def on_click(self) -> None:
        self.expanded = not self.expanded
