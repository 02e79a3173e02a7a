"""The one-line status bar: run state, mode, model, context, tokens and cost, session id.

Each field has a priority; as the terminal narrows, the least important go first
(key hints, then the session id, tokens, context, model, queued count, mode),
and the run state is never cut (at 60 columns it is always whole).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Label

from tui.markup import escape
from tui.widgets.field import Field, fit

if TYPE_CHECKING:  # the harness's modules load after the first frame (see tui.launch)
    from runtime import UsageTotals
    from runtime.model.records import SessionSettings
    from runtime.model.views import ConversationView
    from tui.usage import Catalog

__all__ = ["Field", "StatusBar", "fit"]


HINTS = (
    "[b]enter[/b] [$foreground-muted]send[/]  [b]tab[/b] [$foreground-muted]follow-up[/]  "
    "[b]shift+tab[/b] [$foreground-muted]mode[/]  [b]/help[/b]"
)
SEPARATOR = "  [$foreground-muted]·[/]  "
#: While the harness process is parked (tui.parking): the first key typed wakes it.
ASLEEP = "harness asleep"


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

    def __init__(self, catalog: Catalog | None = None) -> None:
        super().__init__()
        self.catalog = catalog  # the user's model catalog (Config.model_info), for windows
        self._shown_view: tuple[ConversationView, SessionSettings | None] | None = None
        self._retry_seen: dict[tuple[str, int], float] = {}  # retry -> when first shown
        self._ticking: Timer | None = None
        self._fields: list[Field] = []
        self._notice: str | None = None
        self._shown: tuple[str, str] = ("", "")
        #: A storage error ended the session: its runs' last stored states (a run left
        #: "writing") are not what goes on, so the run's field says that instead.
        self.stopped = False
        self.asleep = False  # the harness process is parked (tui.parking)

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

    def show(
        self,
        view: ConversationView,
        settings: SessionSettings | None = None,
        jobs: int = 0,
        below: UsageTotals | None = None,
    ) -> None:
        """`jobs`: how many background jobs of the session run now; `below`: what its
        subagents spent (counted into the tokens and cost shown)."""
        from tui.widgets.status_fields import fields  # with the first view, not the first frame

        self._shown_view = (view, settings)
        self._fields = fields(view, settings, self._retry_in(view), self.catalog, jobs, below)
        if self.stopped and self._fields:
            self._fields[0] = Field(0, "[$error]● session stopped[/]")
        self._draw()

    def stop(self) -> None:
        """The session stopped (a storage error): said in the run's field from now on."""
        self.stopped = True
        if self._shown_view is not None:
            self.show(*self._shown_view)

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

    def sleeping(self, asleep: bool) -> None:
        """The harness process parked (True) or back (False): said quietly, last."""
        self.asleep = asleep
        self._draw()

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
        if self.asleep:
            fields.insert(len(self._fields), Field(8, f"[$foreground-muted]{ASLEEP}[/]"))
        width = self.size.width or self.app.size.width - 2
        kept = fit(fields, width, gap=Content.from_markup(SEPARATOR).cell_length)
        left = SEPARATOR.join(f.markup for f in kept if f is not right)
        shown = (left, right.markup if right in kept else "")
        if shown != self._shown:
            self._shown = shown
            self.query_one("#status-left", Label).update(shown[0])
            self.query_one("#status-right", Label).update(shown[1])
