"""The session picker: a modal screen listing sessions, filtered as you type.

This directory's sessions come first, then the others (each with its
directory), newest first within each; a row shows the title, its age and its
size in entries. Typing filters: every word typed must be in the title, the id
or the directory (any case); when no session has them all, the letters in order
anywhere will do. Enter returns the highlighted session's id, Esc returns None.

From any screen of an app (in a worker, since it waits):

    picker = await SessionPicker.load(harness, cwd)   # Harness or ThreadedHarness
    chosen = await app.push_screen_wait(picker)       # a conversation id, or None
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from runtime import SessionSummary
from tui.sessionlist import age, filter_sessions, home_relative, order_sessions

__all__ = ["SessionPicker"]


class SessionPicker(ModalScreen[str | None]):
    """Pick a session: Up/Down move, typing filters, Enter opens, Esc cancels."""

    DEFAULT_CSS = """
    SessionPicker {
        align: center middle;
    }
    SessionPicker > Vertical {
        width: 90%;
        max-width: 120;
        height: 80%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    SessionPicker #picker-title {
        height: 1;
        margin-bottom: 1;
    }
    SessionPicker Input, SessionPicker Input:focus {
        height: 3;
        border: round $primary 40%;
        padding: 0 1;
    }
    SessionPicker OptionList {
        height: 1fr;
        border: none;
        background: $surface;
        padding: 0;
    }
    SessionPicker #picker-count {
        height: 1;
        color: $text-muted;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", show=False, priority=True),
        Binding("enter", "open", "Open", show=False, priority=True),
        Binding("down", "move('down')", show=False, priority=True),
        Binding("up", "move('up')", show=False, priority=True),
        Binding("pagedown", "move('page_down')", show=False, priority=True),
        Binding("pageup", "move('page_up')", show=False, priority=True),
    ]

    def __init__(
        self, sessions: Sequence[SessionSummary], cwd: str, *, now: float | None = None
    ) -> None:
        super().__init__()
        self.sessions = order_sessions(sessions, cwd)
        self.cwd = cwd
        self.now = now
        self.shown: list[SessionSummary] = []

    @classmethod
    async def load(cls, harness: Any, cwd: str, **kwargs: Any) -> SessionPicker:
        """A picker over every session `harness` (a Harness or ThreadedHarness) stores."""
        return cls(await harness.session_summaries(), cwd, **kwargs)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                "[b]Resume a session[/]  [$text-muted]type to filter · Enter opens · "
                "Esc cancels[/]",
                id="picker-title",
            )
            yield Input(placeholder="filter by title, id or directory", id="picker-filter")
            yield OptionList(id="picker-list")
            yield Static("", id="picker-count")

    def on_mount(self) -> None:
        self.query_one(OptionList).can_focus = False
        self.query_one(Input).focus()
        self._show("")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._show(event.value)

    def _show(self, query: str) -> None:
        self.shown = filter_sessions(self.sessions, query)
        now = time.time() if self.now is None else self.now
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([self._option(s, now) for s in self.shown])
        if self.shown:
            options.highlighted = 0
        here = sum(1 for s in self.shown if s.conversation.cwd == self.cwd)
        total = len(self.sessions)
        count = f"{len(self.shown)} of {total} sessions · {here} in this directory"
        if not self.sessions:
            count = "no sessions yet: start one with `bastion`"
        elif not self.shown:
            count = f"no session matches {query!r} (of {total})"
        self.query_one("#picker-count", Static).update(escape(count))

    def _option(self, summary: SessionSummary, now: float) -> Option:
        c = summary.conversation
        title = escape(c.title or "(untitled)")
        size = f"{summary.entries} entr{'y' if summary.entries == 1 else 'ies'}"
        where = "" if c.cwd == self.cwd else f"  [$text-muted]{escape(home_relative(c.cwd))}[/]"
        meta = f"[$text-muted]{age(c.updated_at, now)} · {size} · {c.id[:8]}[/]"
        return Option(f"[b]{title}[/]\n  {meta}{where}", id=c.id)

    def action_move(self, how: str) -> None:
        getattr(self.query_one(OptionList), f"action_cursor_{how}")()

    def action_open(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.shown:
            return
        self.dismiss(self.shown[options.highlighted].conversation.id)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # a click opens it
        self.dismiss(self.shown[event.option_index].conversation.id)
