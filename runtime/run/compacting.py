"""Compaction inside a run: shown while it works, cancellable, and said when it ends.

A run compacts before a model request that would not leave the reserve free, and
once after a context overflow (runtime.run.loop). While it does, the run publishes
`CompactionProgress` events (transient, in the run's seq like its deltas): started
(what is summarised), writing (how much of the summary is in, at most every
`PROGRESS_INTERVAL`), then done (the tokens freed), cancelled or failed. The summary
itself is a durable entry whose data keeps `freed_tokens`.

In the background: once a request's estimate passes BACKGROUND_AT of the budget, the
summary is started without waiting for it (`start_background`): the run sends that
request as it is and goes on, and the request after the summary lands is built with
it (`take_background`). A request that would pass the budget itself waits for the one
under way (`run`) rather than starting another. A background summary that fails is
said once (its `failed` event) and not tried again this run; the run's end stops one
still being written (`close`), and nothing of it was committed. A crash loses only
the summary's work: the next request past the threshold starts it again.

`cancel()` (Esc in the app, Ctrl+C in `--plain`, through `Harness.cancel_compaction`)
stops the summary request, not the run: nothing is committed, the run sends its
request uncompacted, and compacts no more this run. If that request is too long for
the model, the run fails with one line saying so and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.context.compaction import Compactor, Plan, Progress
from runtime.model.errors import CompactionFailed
from runtime.model.events import CompactionProgress, Event
from runtime.model.records import Entry

Gate = Callable[[], Awaitable[tuple[bool, str]]]  # PreCompact: (blocked, instructions)

log = logging.getLogger(__name__)

__all__ = ["BACKGROUND_AT", "PROGRESS_INTERVAL", "RunCompaction"]

PROGRESS_INTERVAL = 0.25  # seconds between `writing` events
#: A request estimated past this share of the budget starts a summary in the background.
BACKGROUND_AT = 0.8


class _Published(Progress):
    """Progress as events of one run, in its transient seq."""

    def __init__(self, owner: RunCompaction, run_id: str, background: bool = False) -> None:
        self.owner = owner
        self.run_id = run_id
        self.background = background
        self.shown = False
        self.plan: Plan | None = None
        self._last = 0.0

    def started(self, plan: Plan) -> None:
        self.plan, self.shown = plan, True
        self.send("started")

    def writing(self, written: int) -> None:
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL:
            self._last = now
            self.send("writing", written=written)

    def send(self, phase: str, **fields: Any) -> None:
        plan = self.plan
        entries, tokens = (len(plan.compact), plan.tokens) if plan is not None else (0, 0)
        owner = self.owner
        owner.publish(
            CompactionProgress(
                owner.conversation_id, self.run_id, owner.epoch, owner.next_seq(), phase,
                entries, tokens, **fields, background=self.background,
            )
        )  # fmt: skip


class RunCompaction:
    """One run's compactions: at most one at a time, each cancellable."""

    def __init__(
        self,
        compactor: Compactor,
        conversation_id: str,
        publish: Callable[[Event], None],
        epoch: int,
        next_seq: Callable[[], int],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        self.compactor = compactor
        self.conversation_id = conversation_id
        self.publish = publish
        self.epoch = epoch
        self.next_seq = next_seq
        self.settle = settle  # lets a commit under way land after a cancellation
        self.cancelled = False  # the user cancelled one: this run compacts no more
        self._task: asyncio.Future[Entry | None] | None = None
        self._background: asyncio.Task[Entry | None] | None = None
        self._background_failed = False  # said once: not tried again this run

    def start_background(self, run_id: str, gate: Gate | None = None) -> bool:
        """Start a summary that the run does not wait for; False if one is under way,
        or landed and not taken yet, or this run will not compact (cancelled, failed)."""
        if self._background is not None or self.cancelled or self._background_failed:
            return False
        self._background = asyncio.ensure_future(self._gated(run_id, "background", True, gate))
        return True

    def take_background(self) -> Entry | None:
        """The summary made in the background, once it has landed (then it is the
        caller's: the next one may start); None while it is written, or if none was."""
        task = self._background
        if task is None or not task.done():
            return None
        self._background = None
        entry = None if task.cancelled() else task.result()
        if entry is None and not self.cancelled:
            self._background_failed = True
        return entry

    def detach(self) -> asyncio.Task[Entry | None] | None:
        """The run answered: a summary still being written in the background goes on
        without it (seed 004: placed at once when the conversation is idle, otherwise
        at the next turn boundary); the driver hands it to its next run (`adopt`)."""
        task, self._background = self._background, None
        return task if task is not None and not task.done() else None

    def adopt(self, task: asyncio.Task[Entry | None]) -> None:
        """A summary an earlier run left writing: this run takes it up where its own
        would be (used from the request after it lands, waited for past the budget)."""
        self._background = task

    async def close(self) -> None:
        """The run ends: a summary still being written in the background is stopped
        (nothing of it is committed: its commit is the run's, fenced by its lease)."""
        task, self._background = self._background, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def cancel(self) -> bool:
        """Stop the compaction under way (the run goes on); False if there is none."""
        task = self._task
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def run(self, run_id: str, reason: str, gate: Gate | None = None) -> Entry | None:
        """Compact now; None when it was cancelled, failed or had nothing whole to compact.
        A summary under way in the background is waited for instead of a second one."""
        if self._background is not None:
            await asyncio.wait([self._background])
            if (entry := self.take_background()) is not None:
                return entry
        if self.cancelled:
            return None
        return await self._gated(run_id, reason, False, gate)

    async def _gated(
        self, run_id: str, reason: str, background: bool, gate: Gate | None
    ) -> Entry | None:
        """Ask the PreCompact hooks (`gate`) first: a block stops this run compacting
        (as a cancel does); their instructions go to the summary."""
        instructions = None
        if gate is not None:
            blocked, given = await gate()
            if blocked:
                self.cancelled = True
                return None
            instructions = given or None
        return await self._run(run_id, reason, background, instructions)

    async def _run(
        self, run_id: str, reason: str, background: bool, instructions: str | None
    ) -> Entry | None:
        progress = _Published(self, run_id, background)
        task = asyncio.ensure_future(
            self.compactor.compact(
                instructions,
                active_run_id=run_id,
                reason=reason,
                progress=progress,
                background=background,
            )
        )
        self._task = task
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:  # the run itself is ending: so does its summary
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        finally:
            self._task = None
        return await self._ended(task, progress)

    async def _ended(
        self, task: asyncio.Future[Entry | None], progress: _Published
    ) -> Entry | None:
        if task.cancelled():
            await self.settle()
            self.cancelled = True
            progress.send("cancelled", message="compaction cancelled: the run goes on uncompacted")
            return None
        try:
            entry = task.result()
        except CompactionFailed as exc:
            log.warning("compaction of %s failed: %s", self.conversation_id, exc)
            if progress.shown:
                progress.send("failed", message=exc.message)
            return None
        if progress.shown:
            freed = int(entry.data.get("freed_tokens", 0)) if entry is not None else 0
            progress.send("done", freed=freed)
        return entry
