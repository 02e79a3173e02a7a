"""`bastion -r` with no id: choose the session to resume before anything opens it.

The app shows `SessionPicker` in a small app of its own and then starts as
`bastion -r ID` (`--plain` uses `tui.sessionlist.choose_numbered`; print mode
cannot ask and says what to give instead).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from textual.app import App

from runtime import Harness, SessionSummary
from themes import DEFAULT_THEME, THEMES
from themes import register as register_themes
from tui.widgets.picker import Search, SessionPicker

__all__ = ["PickerApp", "choose_in_app"]

from tui.sessionlist import NO_SESSIONS


class PickerApp(App[str | None]):
    """Only the picker: exits with the chosen id, or None."""

    def __init__(
        self,
        sessions: Sequence[SessionSummary],
        cwd: str,
        *,
        theme: str = DEFAULT_THEME,
        now: float | None = None,
        search: Search | None = None,
        short: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.sessions, self.cwd, self.now, self.search = sessions, cwd, now, search
        self.short = short
        register_themes(self)
        self.theme = theme if theme in THEMES else DEFAULT_THEME

    def on_mount(self) -> None:
        picker = SessionPicker(
            self.sessions, self.cwd, now=self.now, search=self.search, short=self.short
        )
        self.push_screen(picker, self.exit)


async def _choose(theme: str) -> str | None:
    """The picker on the loop the store was opened on, so it can search it."""
    harness = await Harness.open()
    try:
        sessions = await harness.session_summaries()
        if not sessions:
            print(f"bastion: {NO_SESSIONS}")
            return None
        short = await harness.short_ids([s.conversation.id for s in sessions])
        app = PickerApp(sessions, os.getcwd(), theme=theme, search=harness.search, short=short)
        return await app.run_async()
    finally:
        await harness.close()


def choose_in_app(theme: str = DEFAULT_THEME) -> str | None:
    """Show the picker over every stored session (searching their text as you type);
    the chosen id, or None (nothing to pick, or Esc). Store errors propagate as
    BastionError."""
    import asyncio

    return asyncio.run(_choose(theme))
