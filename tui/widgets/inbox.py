"""The inbox strip above the prompt: queued steers and follow-ups, newest last."""

from __future__ import annotations

from textual.reactive import var
from textual.widgets import Static

from runtime.model.records import InboxMode
from runtime.model.views import ConversationView
from tui.markup import escape

__all__ = ["InboxStrip"]

KINDS = {
    InboxMode.STEER: "steer",
    InboxMode.FOLLOW_UP: "follow-up",
    InboxMode.PROMPT: "next",
    InboxMode.INTERRUPT_NEXT: "urgent",
}
MAX_TEXT = 90


class InboxStrip(Static):
    """One line per queued item with its kind, then the held ones (Ctrl+R sends them);
    hidden when nothing is queued or held."""

    DEFAULT_CSS = """
    InboxStrip {
        height: auto;
        max-height: 5;
        padding: 0 2;
        color: $text-muted;
        display: none;
    }
    InboxStrip.-shown {
        display: block;
    }
    """

    shown: var[bool] = var(False, toggle_class="-shown")
    _drawn: tuple[object, object] | None = None  # the queued and held items last drawn

    def show(self, view: ConversationView) -> None:
        # Called on every frame: a Static's update asks for a layout of the whole screen
        # even when the text is the same, so nothing is done unless the items changed.
        queued = view.queued_inbox
        if self._drawn == (queued, view.held_inbox):
            return
        self._drawn = (queued, view.held_inbox)
        lines = []
        for item in queued:
            kind = KINDS.get(InboxMode(item.mode), str(item.mode))
            text = _short(item.text)
            lines.append(f"[$accent]» {kind:<9}[/] {escape(text)}")
        if lines:
            lines[-1] += "  [$foreground-muted](↑ on an empty prompt edits it)[/]"
        for item in view.held_inbox:  # queued behind a run that failed (issue 25, item 13)
            lines.append(f"[$warning]» held     [/] {escape(_short(item.text))}")
        if view.held_inbox:
            lines[-1] += "  [$foreground-muted](the run before it failed: Ctrl+R sends it)[/]"
        self.update("\n".join(lines))
        self.shown = bool(lines)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
