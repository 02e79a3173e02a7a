"""The PostgreSQL engine: a writer connection and a reader connection, each owned by
one thread (runtime.store.threads), as SQLite's are.

A write is one READ COMMITTED transaction whose first statement on a
conversation is `SELECT … FOR UPDATE` of its row (runtime.store.dialect), so
transactions on one conversation run one after another, whichever machine they
come from, and a fencing token checked there is still the lease token when the
transaction commits; a compare-and-set is still decided by its row count. A read
is one REPEATABLE READ, READ ONLY transaction: one consistent snapshot.

Every error psycopg raises becomes a StoreError naming the store without its
password (runtime.store.location.redacted); a connection that failed or a server
that went away is StoreUnreachable, and fails the store once (the session is
resumable when the database is back: everything committed is there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

try:
    import psycopg
except ImportError as exc:  # (the optional extra is not installed)
    from runtime.model.errors import ConfigError

    raise ConfigError(
        "a PostgreSQL store needs psycopg, which is not installed",
        hint="pip install -e '.[postgresql]' in bastion's clone, or remove `store` from your config "
        "(and BASTION_STORE)",
    ) from exc

from runtime.model.errors import StoreError, StoreLocked, StoreReadOnly, StoreUnreachable
from runtime.store.dialect import POSTGRESQL, Db
from runtime.store.location import redacted
from runtime.store.pg import schema
from runtime.store.pg.connection import PgDb
from runtime.store.threads import Connection, Job

if TYPE_CHECKING:
    from runtime.model.results import SearchHit

__all__ = ["CONNECT_TIMEOUT", "DriverError", "PgEngine", "connect", "explain"]

T = TypeVar("T")
CONNECT_TIMEOUT = 10  # seconds to reach the server before the store is refused
LOCK_TIMEOUT_MS = 10_000  # a row another machine's transaction holds, waited for (as SQLite's)
DriverError = psycopg.Error  # (what `explain` takes: for callers that do not import psycopg)


def explain(url: str, exc: psycopg.Error) -> StoreError:
    """One line for `exc`, naming the store without its password (and never repeating
    the password, should the server's message hold it)."""
    where = redacted(url)
    said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    password = _password(url)
    if password:
        said = said.replace(password, "***")
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return StoreLocked(
            f"the store {where} stayed locked by another transaction for "
            f"{LOCK_TIMEOUT_MS // 1000} s: {said}",
            pid=None,
            hint="another bastion is writing this session; try again, everything committed is kept",
        )
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return StoreReadOnly(
            f"the store {where} is read-only: {said}",
            hint="point `store` at a primary server, or ask its owner for write access; "
            "everything committed is kept",
        )
    if _unreachable(exc):
        return StoreUnreachable(
            f"cannot reach the store {where}: {said}",
            hint="check that the database server is running and reachable, then resume "
            "(bastion -r ID); everything committed is kept",
        )
    return StoreError(f"the store {where} refused a statement: {said}")


def _unreachable(exc: psycopg.Error) -> bool:
    """Is `exc` the server out of reach (refused, gone, the connection dropped), rather
    than a statement it refused? SQLSTATE class 08 and 57P (shutdown), or a connection
    failure on this side (no SQLSTATE)."""
    if isinstance(exc, psycopg.InterfaceError):
        return True
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(("08", "57P"))


def _password(url: str) -> str:
    from urllib.parse import parse_qs, unquote, urlsplit

    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if parts.password:
            return unquote(parts.password)
        found = parse_qs(parts.query).get("password")
        if found:
            return found[0]
    return ""


def connect(url: str) -> psycopg.Connection[Any]:
    """A connection to the store (autocommit; a write waits for a locked row at most
    LOCK_TIMEOUT_MS)."""
    return _connect(url)


def _connect(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
    return conn


def _close(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.close()


class PgEngine:
    """Transactions on one PostgreSQL database (runtime.store.interface.Engine)."""

    dialect = POSTGRESQL
    path: Path | None = None

    def __init__(
        self,
        url: str,
        writer: Connection[psycopg.Connection[Any]],
        reader: Connection[psycopg.Connection[Any]],
    ) -> None:
        self._url = url  # (never shown: `where` is what may be)
        self.where = redacted(url)
        self.writer = writer
        self.reader = reader

    def __repr__(self) -> str:
        return f"PgEngine({self.where!r})"

    @classmethod
    async def open(cls, url: str) -> PgEngine:
        """Connect, refuse a schema this build cannot use, create or migrate the rest."""

        def prepared() -> None:
            conn = _connect(url)
            try:
                schema.prepare(conn, redacted(url))
            finally:
                _close(conn)

        try:
            await asyncio.to_thread(prepared)
            writer = await asyncio.to_thread(
                Connection, lambda: _connect(url), "bastion-pg-writer", _close
            )
            try:
                reader = await asyncio.to_thread(
                    Connection, lambda: _connect(url), "bastion-pg-reader", _close
                )
            except BaseException:
                await writer.close()
                raise
        except psycopg.Error as exc:
            raise explain(url, exc) from exc
        return cls(url, writer, reader)

    def storage_error(self, exc: BaseException) -> bool:
        return isinstance(exc.__cause__, psycopg.Error)

    def stop_waiting(self) -> None:
        """(A write waits for a locked row at most LOCK_TIMEOUT_MS; nothing to stop.)"""

    async def close(self) -> None:
        await asyncio.gather(self.writer.close(), self.reader.close())

    def _transaction(self, conn: psycopg.Connection[Any], begin: str, fn: Callable[[Db], T]) -> T:
        try:
            conn.execute(begin)
        except psycopg.Error as exc:
            raise explain(self._url, exc) from exc
        try:
            result = fn(PgDb(conn))
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, psycopg.Error):
                raise explain(self._url, exc) from exc
            raise

    async def write(
        self,
        body: Callable[[Db], T],
        on_done: Callable[[T], None] | None,
        usable: Callable[[], None],
    ) -> T:
        def run(_: Job) -> T:
            usable()  # (failed while this job waited its turn: nothing is written)
            return self._transaction(self.writer.db, "BEGIN ISOLATION LEVEL READ COMMITTED", body)

        return await self.writer.run(run, on_done)

    async def read(self, fn: Callable[[Db], T]) -> T:
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        return await self.reader.run(lambda _: self._transaction(self.reader.db, begin, fn))

    def search(self, db: Db, query: str, limit: int) -> list[SearchHit]:
        from runtime.store.pg.search import search

        return search(db, query, limit)
