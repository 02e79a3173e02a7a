"""The store's threads: a database connection owned by one thread, work sent to it as
whole functions (each engine runs each transaction so, whole, on its writer's thread;
reads on its reader's: runtime.store.sqlite_engine, runtime.store.pg.engine). A caller cancelled while its job waits drops
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
from typing import Any, Generic, TypeVar

__all__ = ["Connection", "Job", "close_sqlite", "connect_sqlite"]

T = TypeVar("T")
C = TypeVar("C")
log = logging.getLogger(__name__)


def connect_sqlite(path: Path, busy_ms: int) -> sqlite3.Connection:
    db = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_ms / 1000
    )
    db.execute(f"PRAGMA busy_timeout={busy_ms}")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def close_sqlite(db: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        db.close()


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


class Connection(Generic[C]):
    """A connection owned by one thread; work goes to it as whole functions."""

    def __init__(self, connect: Callable[[], C], name: str, close: Callable[[C], None]) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)
        self._close = close
        try:
            self.db: C = self._pool.submit(connect).result()
        except BaseException:
            self._pool.shutdown(wait=False)
            raise

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
            self._close(self.db)

        try:
            closed = asyncio.wrap_future(self._pool.submit(close))
        except RuntimeError:  # already shut down
            return
        finally:
            self._pool.shutdown(wait=False)
        await closed
