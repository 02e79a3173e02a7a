"""Above the prompt: the `/command` completions while one is typed, and a command's output."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import var
from textual.widgets import Static

from tui.markup import escape

if TYPE_CHECKING:  # the commands load with the first "/" typed, not with the app
    from tui.slash import SlashCommand

__all__ = ["CommandHints", "CommandOutput"]


class CommandHints(Static):
    """Commands matching what is typed; Up/Down choose, Tab or Enter complete."""

    DEFAULT_CSS = """
    CommandHints {
        height: auto;
        padding: 0 2;
        display: none;
    }
    CommandHints.-shown {
        display: block;
    }
    """

    shown: var[bool] = var(False, toggle_class="-shown")

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.matches: list[SlashCommand] = []
        self.index = 0

    def offer(self, matches: list[SlashCommand]) -> None:
        if [m.name for m in matches] != [m.name for m in self.matches]:
            self.index = 0
        self.matches = matches
        self.shown = bool(matches)
        self._draw()

    def move(self, step: int) -> None:
        if self.matches:
            self.index = (self.index + step) % len(self.matches)
            self._draw()

    @property
    def chosen(self) -> SlashCommand | None:
        return self.matches[self.index] if self.matches else None

    def _draw(self) -> None:
        width = max((len(m.usage) for m in self.matches), default=0)
        lines = []
        for i, command in enumerate(self.matches):
            usage = escape(command.usage.ljust(width))
            if i == self.index:
                lines.append(f"[reverse][b]{usage}[/b]  {escape(command.summary)}[/reverse]")
            else:
                lines.append(f"[$accent]{usage}[/]  [$foreground-muted]{command.summary}[/]")
        self.update("\n".join(lines))


class CommandOutput(VerticalScroll):
    """What the last command said; Esc (with no run going) or the next send closes it."""

    DEFAULT_CSS = """
    CommandOutput {
        height: auto;
        max-height: 60%;
        margin: 0 1;
        padding: 0 1;
        border-left: thick $accent;
        display: none;
    }
    CommandOutput.-shown {
        display: block;
    }
    CommandOutput.-error {
        border-left: thick $error;
    }
    CommandOutput > Static {
        height: auto;
    }
    """

    shown: var[bool] = var(False, toggle_class="-shown")
    error: var[bool] = var(False, toggle_class="-error")

    def compose(self) -> ComposeResult:
        yield Static(id="command-text")

    def say(self, markup: str, *, error: bool = False) -> None:
        self.query_one("#command-text", Static).update(markup)
        self.error = error
        self.shown = True
        self.scroll_home(animate=False)

    def close(self) -> None:
        self.shown = False
