"""The store's threads: a sqlite3 connection owned by one thread, work sent to it as
whole functions (runtime.store.database runs each transaction so, whole, on its
writer's thread; reads on its reader's). A caller cancelled while its job waits drops
the job; one cancelled while its job runs leaves it to finish, and its `on_done` runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Connection", "Job"]

T = TypeVar("T")
log = logging.getLogger(__name__)


def _connect(path: Path, busy_ms: int) -> sqlite3.Connection:
    db = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_ms / 1000
    )
    db.execute(f"PRAGMA busy_timeout={busy_ms}")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


class Job:
    """One unit of work for a connection's thread; abandoned when its caller is cancelled."""

    __slots__ = ("abandoned", "fn")

    def __init__(self, fn: Callable[[Job], Any]) -> None:
        self.fn = fn
        self.abandoned = False

    def __call__(self) -> Any:
        if self.abandoned:
            raise asyncio.CancelledError()  # dropped before it began
        return self.fn(self)


class Connection:
    """A sqlite3 connection owned by one thread; work goes to it as whole functions."""

    def __init__(self, path: Path, name: str, busy_ms: int) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)
        self.db: sqlite3.Connection = self._pool.submit(_connect, path, busy_ms).result()

    async def run(self, fn: Callable[[Job], T], on_done: Callable[[T], None] | None = None) -> T:
        """Run `fn(job)` on the thread. Cancelling the caller drops a job not begun (and
        marks one under way abandoned: `fn` may look); a job under way finishes, and
        `on_done` still runs with its result."""
        job = Job(fn)
        future = asyncio.wrap_future(self._pool.submit(job))

        def done(f: asyncio.Future[T]) -> None:
            # Always read the outcome: the error of a job whose caller was cancelled
            # (a job dropped before it began ends in CancelledError) has nobody else to
            # read it, and asyncio would print "Future exception was never retrieved".
            if f.cancelled():
                return
            error = f.exception()
            if error is None:
                if on_done is not None:
                    on_done(f.result())
            elif job.abandoned and not isinstance(error, asyncio.CancelledError):
                log.info("a store job whose caller was cancelled failed: %s", error)

        future.add_done_callback(done)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            job.abandoned = True
            raise

    async def close(self) -> None:
        """Close the connection on its thread, after the jobs already queued; returns
        once it is closed (closing the last connection checkpoints the WAL under a lock,
        which a store opened right after would otherwise find held)."""

        def close() -> None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()

        try:
            closed = asyncio.wrap_future(self._pool.submit(close))
        except RuntimeError:  # already shut down
            return
        finally:
            self._pool.shutdown(wait=False)
        await closed
