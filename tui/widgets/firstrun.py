"""The first-run screen: no model is configured yet.

It names the flag, environment variables and config keys that choose a model,
and lists the local servers that answer (Ollama, llama.cpp), probed on a
worker so the screen is up at once and says it is still asking. `r` asks
again; q, Esc or Enter leave (the command then exits 2, as print mode does), and
what it said stays on the terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from runtime import (
    PROBE_TIMEOUT,
    LocalServer,
    ProbeTarget,
    default_targets,
    first_run_text,
    probe_local_servers,
    user_config_path,
    visible,
)
from themes import DEFAULT_THEME, THEMES
from themes import register as register_themes

__all__ = ["FirstRunApp", "FirstRunScreen"]

KEYS = "[$text-muted]r asks the local servers again · q, Esc or Enter quits[/]"


class FirstRunScreen(Screen[None]):
    """How to choose a model, and which local servers answer."""

    DEFAULT_CSS = """
    FirstRunScreen {
        align: center top;
    }
    FirstRunScreen VerticalScroll {
        width: 100%;
        max-width: 100;
        height: 1fr;
        padding: 1 1;
    }
    FirstRunScreen #firstrun-title {
        margin-bottom: 1;
    }
    FirstRunScreen #firstrun-keys {
        margin-top: 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "probe", "Ask again", show=False),
        Binding("q,escape,enter", "leave", "Quit", show=False),
    ]

    def __init__(
        self, targets: Sequence[ProbeTarget] | None = None, *, timeout: float = PROBE_TIMEOUT
    ) -> None:
        super().__init__()
        self.timeout = timeout
        self.targets = tuple(default_targets() if targets is None else targets)
        self.servers: list[LocalServer] | None = None  # None: still asking
        self.config_path = str(user_config_path(os.environ))

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                "[b $primary]bastion[/]  [b]Welcome: choose a model[/]", id="firstrun-title"
            )
            yield Static(self._text(), id="firstrun-text", markup=False)
            yield Static(KEYS, id="firstrun-keys")

    def on_mount(self) -> None:
        self.action_probe()

    def _text(self) -> str:
        probing = [f"{t.name} at {t.base}" for t in self.targets]
        # (a local server's answer names its models: shown, not obeyed)
        return visible(first_run_text(self.servers, self.config_path, probing=probing))

    def action_probe(self) -> None:
        self.servers = None
        self.query_one("#firstrun-text", Static).update(self._text())
        self._probe()

    @work(exclusive=True, group="probe")
    async def _probe(self) -> None:
        self.servers = await probe_local_servers(self.targets, timeout=self.timeout)
        self.query_one("#firstrun-text", Static).update(self._text())

    def action_leave(self) -> None:
        """Quit with exit code 2 (no session ran: a configuration exit, as in print mode),
        leaving what the screen said on the terminal (stderr) once the app has gone."""
        self.app.exit(return_code=2, message=Text(self.text))

    @property
    def text(self) -> str:
        """What the screen says (for tests and for copying)."""
        return self._text()


class FirstRunApp(App[None]):
    """Only the first-run screen (what `bastion` shows when no model is configured)."""

    def __init__(
        self,
        targets: Sequence[ProbeTarget] | None = None,
        *,
        theme: str = DEFAULT_THEME,
        timeout: float = PROBE_TIMEOUT,
    ) -> None:
        super().__init__()
        self.targets = targets
        self.timeout = timeout
        register_themes(self)
        self.theme = theme if theme in THEMES else DEFAULT_THEME

    def on_mount(self) -> None:
        self.push_screen(FirstRunScreen(self.targets, timeout=self.timeout))
