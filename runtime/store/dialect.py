"""The one place where the store's SQL dialects differ.

SQL anywhere in the runtime is written once, in the common subset SQLite and
PostgreSQL share: `?` placeholders, `INSERT … ON CONFLICT … DO NOTHING / DO
UPDATE SET … = excluded.…` (never `INSERT OR IGNORE / REPLACE`), `RETURNING`,
`CAST(? AS TEXT)` where a bare parameter's type would be unknown, `EXISTS`,
`COALESCE`, `LENGTH`, `substr`, quoted `"index"`. What the two do not share is
a method here, asked of the connection a statement runs on (`dialect_of(db)`):

- reading a field of a JSON text column (`json_text`),
- finding one string inside another (`contains`),
- locking the row a transaction decides from (`for_update`, appended to the
  `SELECT` that opens a conversation's transaction: PostgreSQL runs writers at
  once, SQLite one at a time under `BEGIN IMMEDIATE`),
- the clock leases are kept by (`clock`: the server's, which machines sharing a
  PostgreSQL store agree on however their own clocks are set),
- a lock named by a key, held to the transaction's end (`key_lock`: two writers
  about to insert a row under one shared key, a request key's admission, run one
  after the other; SQLite's writers already do).

What is not a fragment lives in each adapter, behind the store: the schema and
its migrations (`runtime.store.migrations` for SQLite, `runtime.store.pg.schema`),
the row id SQLite's full-text index keys on and the full-text query itself
(FTS5 and bm25 in `runtime.store.ftsquery`; tsvector and ts_rank in
`runtime.store.pg.search`), connections, transactions and what a driver error
means (`runtime.store.sqlite_engine`, `runtime.store.pg.engine`). The
placeholders: PostgreSQL's connection wrapper turns `?` into psycopg's `%s`
(`runtime.store.pg.connection`), once per statement text.

The SQLite path runs on a bare `sqlite3.Connection` (no wrapper, so its speed is
what it was); `Db` is the part of its interface the runtime uses, which the
PostgreSQL wrapper also has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import msgspec

__all__ = ["POSTGRESQL", "SQLITE", "Cursor", "Db", "Dialect", "dialect_of"]


class Cursor(Protocol):
    """What a statement gives back: its rows and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Db(Protocol):
    """A connection inside one transaction, as the runtime's SQL uses it."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


class Dialect(msgspec.Struct, frozen=True):
    """The SQL fragments that differ between the store's engines."""

    name: str
    #: `json_text` format: the column, then the key (a fixed identifier, never input).
    _json: str
    _contains: str
    #: Appended to the SELECT that opens a conversation's write transaction.
    for_update: str
    #: The query for the store's clock (seconds since the epoch), which every machine
    #: sharing the store agrees on; "" where the store is one machine's (its own clock).
    clock: str = ""
    #: A statement taking a lock named by its one text parameter until the transaction
    #: ends, taken before checking whether a row under a key shared by every session
    #: exists (so the second of two writers sees the first's row, rather than failing on
    #: its unique key); "" where writers run one at a time anyway.
    key_lock: str = ""

    def json_text(self, column: str, key: str) -> str:
        """The text of `column`'s top-level field `key` (NULL when absent)."""
        if not key.isidentifier() or not column.replace(".", "").isidentifier():
            raise ValueError(f"not an identifier: {column!r}, {key!r}")
        return self._json.format(column=column, key=key)

    def contains(self, haystack: str, needle: str) -> str:
        """A condition: the expression `needle` occurs in `haystack`."""
        return self._contains.format(haystack=haystack, needle=needle)


SQLITE = Dialect(
    "sqlite",
    "json_extract({column}, '$.{key}')",
    "instr({haystack}, {needle}) > 0",
    "",
)
POSTGRESQL = Dialect(
    "postgresql",
    # (PostgreSQL's json parser refuses the escape \u0000, which a stored JSON text may
    # spell: it is read as \u2400 for the field's sake; the text stored is not changed)
    "(replace({column}, '\\u0000', '\\u2400')::json ->> '{key}')",
    "strpos({haystack}, {needle}) > 0",
    " FOR UPDATE",
    "SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8",
    # (a 64-bit hash of the key names the lock: two keys sharing one only wait in turn)
    "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
)


def dialect_of(db: object) -> Dialect:
    """The dialect of the connection `db` (a bare sqlite3 connection is SQLite)."""
    found = getattr(db, "dialect", None)
    return found if isinstance(found, Dialect) else SQLITE
