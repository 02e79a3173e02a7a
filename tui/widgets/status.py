"""The one-line status bar: run state, mode, model, context, tokens and cost, session id.

Each field has a priority; as the terminal narrows, the least important go first
(key hints, then the session id, tokens, context, model, queued count, mode),
and the run state is never cut (at 60 columns it is always whole).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Label

from runtime.records import EntryKind, EntryStatus, Run, RunState, ToolCallState
from runtime.views import ConversationView
from tui.markup import escape
from tui.usage import context_of, count, totals

if TYPE_CHECKING:  # the harness's modules load after the first frame (see tui.launch)
    from runtime.harness import SessionSettings

__all__ = ["StatusBar", "fit", "run_state_label"]

_STATE = {
    RunState.QUEUED: ("$accent", "queued"),
    RunState.RUNNING: ("$accent", "running"),
    RunState.AWAITING_APPROVAL: ("$warning", "awaiting approval"),
    RunState.COMPLETED: ("$success", "done"),
    RunState.INTERRUPTED: ("$warning", "interrupted"),
    RunState.FAILED: ("$error", "failed"),
    RunState.CANCELLED: ("$warning", "cancelled"),
}
_MODE_TONE = {"read-only": "$success", "ask": "$primary", "auto-edit": "$warning"}

HINTS = (
    "[b]enter[/b] [$foreground-muted]send[/]  [b]tab[/b] [$foreground-muted]follow-up[/]  "
    "[b]shift+tab[/b] [$foreground-muted]mode[/]  [b]/help[/b]"
)
SEPARATOR = "  [$foreground-muted]·[/]  "
MAX_TOOL_NAME = 20


@dataclass(frozen=True, slots=True)
class Field:
    priority: int  # lower stays longer
    markup: str

    @property
    def width(self) -> int:
        return _cells(self.markup)


@lru_cache(maxsize=256)
def _cells(markup: str) -> int:
    return Content.from_markup(markup).cell_length


def fit(fields: list[Field], width: int, gap: int) -> list[Field]:
    """`fields` in their order, without the least important ones that do not fit."""
    kept = list(fields)
    used = sum(f.width for f in kept) + gap * (len(kept) - 1)
    while len(kept) > 1 and used > width:
        dropped = max(kept, key=lambda f: f.priority)
        kept.remove(dropped)
        used -= dropped.width + gap
    return kept


def _activity(view: ConversationView, run: Run) -> str:
    """What a running run is doing: running a tool, writing, or thinking."""
    for call in reversed(view.tool_calls):
        if call.run_id == run.id and call.state == ToolCallState.RUNNING:
            return f"running {call.name[:MAX_TOOL_NAME]}"
    for entry in reversed(view.settled):
        if entry.run_id != run.id:
            break
        if entry.kind == EntryKind.ASSISTANT and entry.status == EntryStatus.STREAMING:
            return "writing" if len(view.text_of(entry)) else "thinking"
    return "thinking"


def run_state_label(view: ConversationView, retry_in: float | None = None) -> str:
    """Markup for the active run's state (else the latest's); "idle" if none. `retry_in`:
    seconds until a retried request is sent, when the run waits for one."""
    run = view.active_run or (view.runs[-1] if view.runs else None)
    if run is None:
        return "[$foreground-muted]idle[/]"
    tone, label = _STATE.get(RunState(run.state), ("$foreground-muted", run.state))
    if run.state == RunState.RUNNING and retry_in is not None:
        tone, label = "$warning", f"retrying in {math.ceil(retry_in)} s"
    elif run.state == RunState.RUNNING:
        label = _activity(view, run)
    glyph = "●" if run.terminal else "◌"
    return f"[{tone}]{glyph} {escape(label)}[/]"


def _fields(
    view: ConversationView, settings: SessionSettings | None, retry_in: float | None
) -> list[Field]:
    model = settings.model if settings else view.conversation.agent.model
    mode = settings.approval_mode if settings else view.conversation.agent.approval_mode
    fields = [Field(0, run_state_label(view, retry_in))]
    fields.append(Field(1, f"[b {_MODE_TONE.get(mode, '$error')}]{escape(mode)}[/]"))
    queued = len(view.queued_inbox)
    if queued:
        fields.append(Field(2, f"[$accent]{queued} queued[/]"))
    fields.append(Field(3, f"[b $primary]{escape(model or 'no model')}[/]"))
    ctx = context_of(view, model)
    used = f"{'~' if ctx.estimated else ''}{count(ctx.used)}"
    window = f"/{count(ctx.window)} {ctx.percent}%" if ctx.window else ""
    fields.append(Field(4, f"[$foreground-muted]ctx {used}{window}[/]"))
    spent = totals(view)
    if spent.tokens or spent.cost is not None:
        mark = "~" if spent.estimated else ""
        text = f"{mark}{count(spent.tokens)} tok"
        if spent.cost is not None:
            text += f" ${spent.cost:.4f}"
        fields.append(Field(5, f"[$foreground-muted]{text}[/]"))
    if view.conversation.id:
        fields.append(Field(6, f"[$foreground-muted]{view.conversation.id[-8:]}[/]"))
    return fields


class StatusBar(Horizontal):
    """Fields on the left, key hints (or a transient notice) on the right."""

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
        self._shown_view: tuple[ConversationView, SessionSettings | None] | None = None
        self._retry_seen: dict[tuple[str, int], float] = {}  # retry -> when first shown
        self._ticking: Timer | None = None
        self._fields: list[Field] = []
        self._notice: str | None = None
        self._shown: tuple[str, str] = ("", "")

    def compose(self) -> ComposeResult:
        yield Label(id="status-left")
        yield Label(id="status-right")

    def show_model(self, model: str) -> None:
        """Before the session's first view: the model this invocation will use."""
        self._fields = [
            Field(0, "[$foreground-muted]idle[/]"),
            Field(3, f"[b $primary]{escape(model)}[/]"),
        ]
        self._draw()

    def show(self, view: ConversationView, settings: SessionSettings | None = None) -> None:
        self._shown_view = (view, settings)
        self._fields = _fields(view, settings, self._retry_in(view))
        self._draw()

    def _retry_in(self, view: ConversationView) -> float | None:
        """Seconds left before the active run's retried request (counted from when this
        bar first showed it); a timer redraws the count each second."""
        run = view.active_run
        retry = view.retrying.get(run.id) if run is not None else None
        if run is None or retry is None:
            self._retry_seen.clear()
            return None
        now = time.monotonic()
        since = self._retry_seen.setdefault((run.id, retry.attempt), now)
        if self._ticking is None:
            self._ticking = self.set_timer(1.0, self._tick)
        return max(0.0, retry.delay - (now - since))

    def _tick(self) -> None:
        self._ticking = None
        if self._shown_view is not None and self._retry_seen:
            self.show(*self._shown_view)

    def notice(self, text: str | None) -> None:
        """Show `text` (markup) in place of the key hints; None puts the hints back."""
        self._notice = text
        self._draw()

    def on_resize(self, event: events.Resize) -> None:
        self._draw()

    def _draw(self) -> None:
        # The notice outranks everything but the run state; the hints go first.
        right = Field(1, self._notice) if self._notice else Field(9, HINTS)
        fields = [*self._fields, right] if self._fields else [right]
        width = self.size.width or self.app.size.width - 2
        kept = fit(fields, width, gap=Content.from_markup(SEPARATOR).cell_length)
        left = SEPARATOR.join(f.markup for f in kept if f is not right)
        shown = (left, right.markup if right in kept else "")
        if shown != self._shown:
            self._shown = shown
            self.query_one("#status-left", Label).update(shown[0])
            self.query_one("#status-right", Label).update(shown[1])
