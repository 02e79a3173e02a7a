"""The embedded engine: one SQLite file, WAL, a writer thread and a reader thread.

Every mutation is one `BEGIN IMMEDIATE` transaction that runs whole on the
writer thread, so SQLite's one writer at a time orders them; a read is one
deferred transaction on the reader thread. A caller cancelled while it waits
cannot leave the connection inside a transaction: a job not yet begun is
dropped, one that began finishes (commit or rollback).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from runtime.model.errors import StoreError
from runtime.store import failpoints, storefile
from runtime.store.dialect import SQLITE, Db
from runtime.store.threads import Connection, Job, close_sqlite, connect_sqlite

if TYPE_CHECKING:
    from runtime.model.results import SearchHit

__all__ = ["BUSY_TIMEOUT_MS", "PAGE_SIZE", "SqliteEngine"]

T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000
PAGE_SIZE = 16_384
_BUSY_STEP_MS = 50  # the writer waits for another process's lock in steps, to stay cancellable


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """What `exc` means for a person: locked (by pid when known), read-only, full, corrupt."""
    return storefile.explain(path, exc, waited=BUSY_TIMEOUT_MS / 1000)


def _connection(path: Path, name: str, busy_ms: int) -> Connection[sqlite3.Connection]:
    return Connection(lambda: connect_sqlite(path, busy_ms), name, close_sqlite)


class SqliteEngine:
    """Transactions on one SQLite file (runtime.store.interface.Engine)."""

    dialect = SQLITE

    def __init__(
        self,
        path: Path,
        writer: Connection[sqlite3.Connection],
        reader: Connection[sqlite3.Connection],
    ) -> None:
        self.path: Path | None = path
        self.where = str(path)
        self.writer = writer
        self.reader = reader
        self._cancel_waits = threading.Event()

    @classmethod
    async def open(cls, file: Path) -> SqliteEngine:
        """Create or migrate the file (refusing a newer schema), then connect."""
        await asyncio.to_thread(storefile.prepare_file, file, BUSY_TIMEOUT_MS, PAGE_SIZE)
        try:
            writer = await asyncio.to_thread(_connection, file, "bastion-writer", _BUSY_STEP_MS)
            reader = await asyncio.to_thread(_connection, file, "bastion-reader", BUSY_TIMEOUT_MS)
        except sqlite3.Error as exc:
            raise _store_error(file, exc) from exc
        return cls(file, writer, reader)

    def storage_error(self, exc: BaseException) -> bool:
        """Did SQLite raise `exc`'s cause (a storage error, not a lost compare-and-set)?"""
        return isinstance(exc.__cause__, sqlite3.Error)

    def stop_waiting(self) -> None:
        """A writer waiting for another process's lock gives up now."""
        self._cancel_waits.set()

    async def close(self) -> None:
        self._cancel_waits.set()
        await asyncio.gather(self.writer.close(), self.reader.close())

    def _begin(self, db: sqlite3.Connection, job_abandoned: Callable[[], bool]) -> None:
        """BEGIN IMMEDIATE, waiting in short steps for another process's write lock."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline or job_abandoned() or self._cancel_waits.is_set():
                    raise

    def _in_transaction(self, body: Callable[[Db], T], job: Job, usable: Callable[[], None]) -> T:
        db = self.writer.db
        usable()  # (failed while this job waited its turn: nothing is written)
        assert self.path is not None
        try:
            self._begin(db, lambda: job.abandoned)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc) from exc
        try:
            result = body(db)
            failpoints.fault()  # (the store-fault tests: a full disk, an I/O error, ...)
            db.execute("COMMIT")
            return result
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise _store_error(self.path, exc) from exc
            raise

    async def write(
        self,
        body: Callable[[Db], T],
        on_done: Callable[[T], None] | None,
        usable: Callable[[], None],
    ) -> T:
        """Run `body(db)` in one write transaction on the writer thread; `on_done(result)`
        after it commits, even if the caller was cancelled meanwhile."""
        return await self.writer.run(lambda job: self._in_transaction(body, job, usable), on_done)

    async def read(self, fn: Callable[[Db], T]) -> T:
        """Run `fn(db)` in one read transaction on the reader thread."""

        def run(_: Job) -> T:
            db = self.reader.db
            try:
                db.execute("BEGIN")
                try:
                    return fn(db)
                finally:
                    db.execute("COMMIT")
            except sqlite3.Error as exc:
                assert self.path is not None
                raise _store_error(self.path, exc) from exc

        return await self.reader.run(run)

    def search(self, db: Db, query: str, limit: int) -> list[SearchHit]:
        """Conversations whose entries match `query` (FTS5, bm25), best first."""
        from runtime.store import fulltext

        assert isinstance(db, sqlite3.Connection)
        return fulltext.search(db, query, limit)
