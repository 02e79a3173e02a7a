"""Compaction inside a run: shown while it works, cancellable, and said when it ends.

A run compacts before a model request that would not leave the reserve free, and
once after a context overflow (runtime.run.loop). While it does, the run publishes
`CompactionProgress` events (transient, in the run's seq like its deltas): started
(what is summarised), writing (how much of the summary is in, at most every
`PROGRESS_INTERVAL`), then done (the tokens freed), cancelled or failed. The summary
itself is a durable entry whose data keeps `freed_tokens`.

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

log = logging.getLogger(__name__)

__all__ = ["PROGRESS_INTERVAL", "RunCompaction"]

PROGRESS_INTERVAL = 0.25  # seconds between `writing` events


class _Published(Progress):
    """Progress as events of one run, in its transient seq."""

    def __init__(self, owner: RunCompaction, run_id: str) -> None:
        self.owner = owner
        self.run_id = run_id
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
                entries, tokens, **fields,
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

    def cancel(self) -> bool:
        """Stop the compaction under way (the run goes on); False if there is none."""
        task = self._task
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def run(self, run_id: str, reason: str, instructions: str | None = None) -> Entry | None:
        """Compact now (with a PreCompact hook's `instructions`); None when it was
        cancelled, failed or had nothing whole to compact."""
        if self.cancelled:
            return None
        progress = _Published(self, run_id)
        task = asyncio.ensure_future(
            self.compactor.compact(
                instructions, active_run_id=run_id, reason=reason, progress=progress
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
