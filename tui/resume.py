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
from tui.widgets.picker import SessionPicker

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
    ) -> None:
        super().__init__()
        self.sessions, self.cwd, self.now = sessions, cwd, now
        register_themes(self)
        self.theme = theme if theme in THEMES else DEFAULT_THEME

    def on_mount(self) -> None:
        self.push_screen(SessionPicker(self.sessions, self.cwd, now=self.now), self.exit)


async def _summaries() -> list[SessionSummary]:
    harness = await Harness.open()
    try:
        return await harness.session_summaries()
    finally:
        await harness.close()


def choose_in_app(theme: str = DEFAULT_THEME) -> str | None:
    """Show the picker over every stored session; the chosen id, or None (nothing to
    pick, or Esc). Store errors propagate as BastionError."""
    import asyncio

    sessions = asyncio.run(_summaries())
    if not sessions:
        print(f"bastion: {NO_SESSIONS}")
        return None
    return PickerApp(sessions, os.getcwd(), theme=theme).run()
