"""The session picker: a modal screen listing sessions, filtered as you type.

This directory's sessions come first, then the others (each with its
directory), newest first within each; a row shows the title, its age and its
size in entries. Typing filters: every word typed must be in the title, the id
or the directory (any case); when no session has them all, the letters in order
anywhere will do. Enter returns the highlighted session's id, Esc returns None.

Given a search (`Harness.search`: full-text, every session's messages and
answers), a query of 3 characters or more also searches the conversations' text
once typing pauses (DEBOUNCE): the sessions whose title, id or directory hold
the words come first, then those whose text does, best first, each with the
matching snippet under it. A session found only by its text may be older than
the listed ones.

From any screen of an app (in a worker, since it waits):

    picker = await SessionPicker.load(harness, cwd)   # a HarnessClient
    chosen = await app.push_screen_wait(picker)       # a conversation id, or None
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from runtime import BastionError, SearchHit, SessionSummary, short_ids
from tui.markup import escape
from tui.sessionlist import age, filter_sessions, home_relative, order_sessions

__all__ = ["MIN_SEARCH", "Search", "SessionPicker"]

Search = Callable[[str], Awaitable[Sequence[SearchHit]]]
MIN_SEARCH = 3  # characters before the conversations' text is searched
SNIPPET = 110  # characters of a snippet at most (fewer when the list is narrower)


class SessionPicker(ModalScreen[str | None]):
    """Pick a session: Up/Down move, typing filters, Enter opens, Esc cancels."""

    DEBOUNCE: ClassVar[float] = 0.25  # seconds of no typing before a search
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
        self,
        sessions: Sequence[SessionSummary],
        cwd: str,
        *,
        now: float | None = None,
        search: Search | None = None,
        short: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.sessions = order_sessions(sessions, cwd)
        # the id prefix shown: unique among every stored session (`Harness.short_ids`),
        # or else among these
        self.short = dict(short or short_ids(s.conversation.id for s in self.sessions))
        self.cwd = cwd
        self.now = now
        self.search = search
        self.shown: list[SessionSummary] = []
        self.hits: dict[str, SearchHit] = {}  # conversation id -> its hit, for the shown query
        self.unlisted: set[str] = set()  # found by their text, not among `sessions`
        self.searched: str | None = None  # the query whose text search is shown
        self.query_text = ""
        self.snippet_room = SNIPPET

    @classmethod
    async def load(cls, harness: Any, cwd: str, **kwargs: Any) -> SessionPicker:
        """A picker over every session `harness` (a HarnessClient) stores,
        searching their text with `harness.search`."""
        kwargs.setdefault("search", harness.search)
        sessions = await harness.session_summaries()
        kwargs.setdefault("short", await harness.short_ids([s.conversation.id for s in sessions]))
        return cls(sessions, cwd, **kwargs)

    def compose(self) -> ComposeResult:
        what = "filter or search" if self.search else "filter"
        with Vertical():
            yield Static(
                f"[b]Resume a session[/]  [$text-muted]type to {what} · Enter opens · "
                "Esc cancels[/]",
                id="picker-title",
            )
            placeholder = "filter by title, id or directory"
            if self.search:
                placeholder += f"; {MIN_SEARCH}+ characters search the conversations too"
            yield Input(placeholder=placeholder, id="picker-filter")
            yield OptionList(id="picker-list")
            yield Static("", id="picker-count")

    def on_mount(self) -> None:
        self.query_one(OptionList).can_focus = False
        self.query_one(Input).focus()
        self._show("")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_text = event.value
        self._show(event.value)
        if self.search is not None and len(event.value.strip()) >= MIN_SEARCH:
            so_far = self._summary(event.value) if self.shown else "no title matches"
            self._count(f"{so_far} · searching the text…")
            self._search(event.value)
        else:
            self.workers.cancel_group(self, "search")

    @work(exclusive=True, group="search")
    async def _search(self, query: str) -> None:
        """After DEBOUNCE without more typing (a newer query cancels this one), the
        sessions whose text matches `query`, shown under the title matches."""
        assert self.search is not None
        await asyncio.sleep(self.DEBOUNCE)
        try:
            hits = await self.search(query.strip())
        except BastionError as exc:
            if query == self.query_text:
                self._count(f"search failed: {exc} (the title filter still works)")
            return
        if query == self.query_text:
            self._show(query, hits)

    def _show(self, query: str, hits: Sequence[SearchHit] | None = None) -> None:
        """The sessions for `query`: its title/id/directory matches, then with `hits` (a
        text search's answer) the sessions those found, each hit with its snippet."""
        self.hits = {hit.conversation.id: hit for hit in hits or ()}
        self.searched = query if hits is not None else None
        if hits is None:
            self.shown = filter_sessions(self.sessions, query)
        else:
            self.shown = filter_sessions(self.sessions, query, letters=False)
            listed = {s.conversation.id: s for s in self.sessions}
            seen = {s.conversation.id for s in self.shown}
            for hit in hits:
                if hit.conversation.id not in seen:
                    seen.add(hit.conversation.id)
                    found = listed.get(hit.conversation.id)
                    if found is None:
                        self.unlisted.add(hit.conversation.id)
                    self.shown.append(found or SessionSummary(hit.conversation, 0))
            if not self.shown:
                self.shown = filter_sessions(self.sessions, query)
        self._fill()
        self._count(self._summary(query))

    def _fill(self) -> None:
        now = time.time() if self.now is None else self.now
        options = self.query_one(OptionList)
        was = options.highlighted
        before = self.shown_id(was) if was is not None else None
        room = options.scrollable_content_region.width - 3  # one line under the title
        self.snippet_room = min(SNIPPET, room) if room > 20 else SNIPPET
        options.clear_options()
        options.add_options([self._option(s, now) for s in self.shown])
        ids = [s.conversation.id for s in self.shown]
        if self.shown:
            options.highlighted = ids.index(before) if before in ids else 0

    def shown_id(self, index: int) -> str | None:
        options = self.query_one(OptionList)
        return options.get_option_at_index(index).id if index < options.option_count else None

    def _summary(self, query: str) -> str:
        total = len(self.sessions)
        if not self.sessions and not self.shown:
            return "no sessions yet: start one with `bastion`"
        if not self.shown:
            return f"no session matches {query!r} (of {total})"
        here = sum(1 for s in self.shown if s.conversation.cwd == self.cwd)
        count = f"{len(self.shown)} of {total} sessions · {here} in this directory"
        if self.searched is not None:
            count += f" · {len(self.hits)} by their text"
        return count

    def _count(self, text: str) -> None:
        self.query_one("#picker-count", Static).update(escape(text))

    def _option(self, summary: SessionSummary, now: float) -> Option:
        c = summary.conversation
        title = escape(c.title or "(untitled)", lines=False)
        size = f"{summary.entries} entr{'y' if summary.entries == 1 else 'ies'} · "
        if c.id in self.unlisted:  # its size is not known here
            size = ""
        where = (
            ""
            if c.cwd == self.cwd
            else f"  [$text-muted]{escape(home_relative(c.cwd), lines=False)}[/]"
        )
        if c.id not in self.short:  # found by its text: unique among those known here
            self.short[c.id] = short_ids([c.id], self.short)[c.id]
        meta = f"[$text-muted]{age(c.updated_at, now)} · {size}{self.short[c.id]}[/]"
        hit = self.hits.get(c.id)
        snippet = f"\n  {_snippet(hit, self.snippet_room)}" if hit is not None else ""
        return Option(f"[b]{title}[/]\n  {meta}{where}{snippet}", id=c.id)

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


def _snippet(hit: SearchHit, room: int) -> str:
    """The hit's snippet as markup, the matches in the accent colour, cut at `room`
    characters."""
    out: list[str] = []
    for text, matched in hit.spans:
        if room <= 0:
            break
        part = text if len(text) <= room else text[: room - 1] + "…"
        room -= len(part)
        out.append(
            f"[b $text-accent]{escape(part, lines=False)}[/]"
            if matched
            else escape(part, lines=False)
        )
    return f"[$text-muted]{''.join(out)}[/]"
