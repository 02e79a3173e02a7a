"""What the status line counts beside the view: the conversation's background jobs
running (from their `job.updated` events) and what its subagents spent (asked of the
harness each time one of its task calls ends), so the tokens and cost it shows are
the session's whole work, not its top conversation's alone; and, once, the line a
run's budget stopped it with (a session cost limit stops the next prompt before its
first request, leaving no answer to mark, so this line is what says why). A part of
`tui.app.BastionApp` (a mixin, as `tui.app_keys` is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App

from runtime.model.errors import BastionError, SessionFailedError
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from runtime import HarnessClient, UsageTotals
    from runtime.model.records import SessionSettings
    from runtime.model.views import ConversationView

__all__ = ["ENDED_CALLS", "StatusParts"]

STAYS = 24 * 3600.0  # seconds: a notice the user must have read (the session stopped)
ENDED_CALLS = ("done", "denied", "interrupted")  # a tool call's states once it has ended


class StatusParts(App[int]):
    """The status line's counts (see the module); `BastionApp` defines the rest."""

    harness: HarnessClient | None
    view: ConversationView | None
    settings: SessionSettings | None
    #: (conversation, job) -> running
    jobs: dict[tuple[str, str], bool]
    #: (conversation, its task calls ended when last asked, its subagents' totals)
    below: tuple[str, int, UsageTotals | None]
    #: the newest run whose budget stop was told (or that was there when it was opened)
    told_stop: str | None = None
    conversation_id: str
    #: a storage error ended the session (seed 004): the line said on leaving
    failed_line: str | None = None

    def _session_failed(self, failed: SessionFailedError) -> None:
        """A storage error ended the session (seed 004): said in a notice that stays and
        on the status line; the transcript stays to be read, every action after it is
        refused with the same words, and leaving says it once more and exits 1."""
        from runtime import visible

        line = failed.line(self.conversation_id)
        self.failed_line = line
        self.notify(visible(line), title="session stopped", severity="error",
                    timeout=STAYS, markup=False)  # fmt: skip
        bar = self.query_one(StatusBar)
        bar.stop()
        bar.notice(self._standing_notice())

    def _standing_notice(self) -> str | None:
        """What the status line says in place of the key hints while nothing more
        pressing does: that this terminal is attached to another process's session."""
        if self.failed_line is not None:
            return "[$error]nothing more is saved[/] · Ctrl+C twice leaves"
        harness = self.harness
        if harness is None or not harness.guest:
            return None
        return "[b $success]attached[/] · live from the process driving it"

    def say(self, markup: str, *, error: bool = False) -> None:
        raise NotImplementedError  # (BastionApp's)

    def _below(self, view: ConversationView) -> UsageTotals | None:
        """The subagents' spend as last asked; asked again (on a worker) once another of
        the conversation's task calls has ended, so the status line counts the session's
        whole work, not its top conversation's alone."""
        conv = view.conversation.id
        ended = sum(c.name == "task" and c.state in ENDED_CALLS for c in view.tool_calls)
        known_conv, known_ended, totals = self.below
        if ended and (conv, ended) != (known_conv, known_ended) and self.harness is not None:
            self.below = (conv, ended, totals if conv == known_conv else None)
            self.run_worker(self._ask_below(conv), group="usage", exclusive=True)
        return totals if conv == known_conv else None

    async def _ask_below(self, conv: str) -> None:
        assert self.harness is not None
        try:
            summary = await self.harness.usage(conv)
        except BastionError as exc:  # (the status line keeps what it last knew)
            from tui.markup import escape

            self.say(f"the subagents' spend could not be read: {escape(str(exc))}", error=True)
            return
        totals = None
        for part in summary.children.values():
            totals = part if totals is None else totals.merge(part)
        if self.below[0] == conv:
            self.below = (conv, self.below[1], totals)
            if self.view is not None and self.view.conversation.id == conv:
                self.query_one(StatusBar).show(
                    self.view, self.settings, self._running_jobs(self.view), totals
                )

    def _tell_budget_stop(self, view: ConversationView) -> None:
        """Say once, above the prompt, why the newest run stopped when a budget did."""
        from tui.markup import escape
        from tui.run_words import budget_stop

        run = view.runs[-1] if view.runs else None
        if run is None or run.id == self.told_stop or not run.terminal:
            return
        before = self.view
        first_seen = before is None or before.conversation.id != view.conversation.id
        self.told_stop = run.id
        stop = budget_stop(run)
        if stop and not first_seen:
            self.say(f"[$warning]◼ stopped: {escape(stop)}[/]")

    def _running_jobs(self, view: ConversationView | None) -> int:
        """How many of the conversation's background jobs run (from their events)."""
        conv = view.conversation.id if view is not None else ""
        return sum(running for (of, _), running in self.jobs.items() if of == conv)
