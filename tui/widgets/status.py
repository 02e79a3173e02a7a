"""The one-line status bar (model, run state, tokens) and the inbox strip above the prompt."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.reactive import var
from textual.widgets import Label, Static

from runtime import ConversationView
from runtime.records import InboxMode, Run, RunState

__all__ = ["InboxStrip", "StatusBar", "run_state_label", "usage_label"]

_STATE = {
    RunState.QUEUED: ("$accent", "queued"),
    RunState.RUNNING: ("$accent", "running"),
    RunState.AWAITING_APPROVAL: ("$warning", "awaiting approval"),
    RunState.COMPLETED: ("$success", "done"),
    RunState.INTERRUPTED: ("$warning", "interrupted"),
    RunState.FAILED: ("$error", "failed"),
    RunState.CANCELLED: ("$warning", "cancelled"),
}

HINTS = (
    "[b]enter[/b] [$foreground-muted]send[/]   [b]esc[/b] [$foreground-muted]interrupt[/]   "
    "[b]ctrl+c[/b] [$foreground-muted]quit[/]"
)


def run_state_label(run: Run | None) -> str:
    """Markup for the state of `run` (the active one, else the latest); "idle" if none."""
    if run is None:
        return "[$foreground-muted]idle[/]"
    tone, label = _STATE.get(RunState(run.state), ("$foreground-muted", run.state))
    glyph = "●" if run.terminal else "◌"
    return f"[{tone}]{glyph} {label}[/]"


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def usage_label(run: Run | None) -> str:
    usage = run.usage if run is not None else {}
    if not usage:
        return ""
    tokens = f"↑{_count(int(usage.get('input_tokens', 0)))} ↓{_count(int(usage.get('output_tokens', 0)))}"
    cost = usage.get("cost")
    return tokens + (f"  ${cost:.4f}" if isinstance(cost, int | float) else "")


class StatusBar(Horizontal):
    """`model · state · tokens` on the left, key hints (or a transient notice) on the right."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    StatusBar > #status-left {
        width: 1fr;
    }
    StatusBar > #status-right {
        width: auto;
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._left = ""
        self._notice: str | None = None

    def compose(self) -> ComposeResult:
        yield Label(id="status-left")
        yield Label(HINTS, id="status-right")

    def show_model(self, model: str) -> None:
        """Before the session's first view: the model this invocation will use."""
        self._left = f"[b $primary]{escape(model)}[/]  [$foreground-muted]·[/]  " + run_state_label(
            None
        )
        self.query_one("#status-left", Label).update(self._left)

    def show(self, view: ConversationView) -> None:
        run = view.active_run or (view.runs[-1] if view.runs else None)
        parts = [
            f"[b $primary]{escape(view.conversation.agent.model or 'no model')}[/]",
            run_state_label(run),
        ]
        usage = usage_label(run)
        if usage:
            parts.append(f"[$foreground-muted]{usage}[/]")
        queued = len(view.queued_inbox)
        if queued:
            parts.append(f"[$accent]{queued} queued[/]")
        left = "  [$foreground-muted]·[/]  ".join(parts)
        if left != self._left:
            self._left = left
            self.query_one("#status-left", Label).update(left)

    def notice(self, text: str | None) -> None:
        """Show `text` (markup) in place of the key hints; None puts the hints back."""
        self._notice = text
        self.query_one("#status-right", Label).update(HINTS if text is None else text)


class InboxStrip(Static):
    """Queued steers and follow-ups, one dim line each; hidden when there are none."""

    DEFAULT_CSS = """
    InboxStrip {
        height: auto;
        max-height: 4;
        padding: 0 2;
        color: $text-muted;
        display: none;
    }
    InboxStrip.-shown {
        display: block;
    }
    """

    shown: var[bool] = var(False, toggle_class="-shown")

    def show(self, view: ConversationView) -> None:
        queued = view.queued_inbox
        lines = []
        for item in queued:
            kind = "steer" if item.mode == InboxMode.STEER else "follow-up"
            text = " ".join(item.text.split())
            lines.append(f"[$accent]» {kind}[/] {escape(text[:90])}")
        self.update("\n".join(lines))
        self.shown = bool(lines)
