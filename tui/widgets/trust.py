"""The trust question: asked once, before the app opens a folder with project files.

A folder's `.bastion/config.toml` and `.bastion/settings.toml` apply only once the
user trusts it (runtime.config.trust). When `bastion` opens a folder that has them and
no decision was recorded, this screen says what they would change and asks:

    t  trust it (remembered in your config dir)
    o  trust it for this run only
    n  do not trust it (remembered: not asked again; its files stay ignored)
    Esc / q  not now (ignored this time, asked again next time)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from runtime import visible
from themes import DEFAULT_THEME, THEMES
from themes import register as register_themes

__all__ = ["TrustApp", "TrustScreen"]

KEYS = (
    "[b $warning]t[/] trust it  [b $warning]o[/] this run only  "
    "[b $warning]n[/] don't trust it (not asked again)  [b $warning]esc[/] not now"
)
ANSWERS = {"t": "trusted", "o": "once", "n": "untrusted", "later": "later"}


class TrustScreen(Screen[None]):
    """What the folder's project files would change, and the question."""

    DEFAULT_CSS = """
    TrustScreen {
        align: center top;
    }
    TrustScreen VerticalScroll {
        width: 100%;
        max-width: 100;
        height: 1fr;
        padding: 1 1;
    }
    TrustScreen #trust-title, TrustScreen #trust-changes {
        margin-bottom: 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "answer('t')", "Trust", show=False),
        Binding("o", "answer('o')", "This run only", show=False),
        Binding("n", "answer('n')", "Don't trust", show=False),
        Binding("q,escape", "answer('later')", "Not now", show=False),
    ]

    def __init__(self, folder: str, changes: Sequence[str]) -> None:
        super().__init__()
        self.folder = folder
        self.changes = tuple(changes)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                "[b $primary]bastion[/]  [b]Do you trust the files in this folder?[/]",
                id="trust-title",
            )
            yield Static(self.text, id="trust-changes", markup=False)
            yield Static(KEYS, id="trust-keys")

    @property
    def text(self) -> str:
        """What the screen says (for tests and for copying). The folder's name and each
        change are the repository's words: each is one line, its control characters
        shown (`runtime.visible`), so a hook cannot erase or reorder its own line."""
        changes = [visible(change, lines=False) for change in self.changes]
        lines = [
            f"{visible(self.folder, lines=False)} has project files (.bastion/) that would "
            "change how bastion runs here:",
            "",
            *(f"  • {change}" for change in changes or ["(nothing bastion would apply)"]),
            "",
            "Trust them only if you trust whoever wrote this repository. Until you do, "
            "bastion runs on your own config and ignores them; your API keys are never "
            "routed by a project file either way.",
        ]
        return "\n".join(lines)

    def action_answer(self, key: str) -> None:
        self.app.exit(result=ANSWERS[key])


class TrustApp(App[str]):
    """Only the trust question; its result is "trusted", "once", "untrusted" or "later"."""

    def __init__(self, folder: str, changes: Sequence[str], *, theme: str = DEFAULT_THEME) -> None:
        super().__init__()
        self.folder = folder
        self.changes = changes
        register_themes(self)
        self.theme = theme if theme in THEMES else DEFAULT_THEME

    def on_mount(self) -> None:
        self.push_screen(TrustScreen(self.folder, self.changes))
