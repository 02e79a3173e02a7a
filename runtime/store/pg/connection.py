"""A psycopg connection as the runtime's `Db` (runtime.store.dialect): the same
`execute(sql, params)` with `?` placeholders, rows as tuples, `rowcount`.

The runtime's SQL is written with `?`; psycopg's are `%s` (and a literal `%` is
`%%`). Each statement text is translated once and remembered. The schema keeps
SQLite's integer flags (`replay_safe`, `interrupt_requested`), so a Python bool is
sent as 0 or 1.

PostgreSQL's text cannot hold U+0000 (SQLite's can): a NUL in a string written is
stored as U+2400 (␀, the symbol for null), the one change this store makes to text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from runtime.store.dialect import POSTGRESQL

__all__ = ["PgDb", "translate"]


@lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """`sql` with its `?` placeholders as psycopg's `%s`. A `?` inside a quoted string
    or identifier is left alone (the runtime's SQL has none, but a literal may)."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


def _param(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\u2400") if "\x00" in value else value
    return int(value) if isinstance(value, bool) else value


def _params(params: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(_param(p) for p in params)


class PgDb:
    """One psycopg connection, inside the transaction its engine opened."""

    dialect = POSTGRESQL

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self.conn.execute(translate(sql), _params(parameters))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        rows = [_params(p) for p in parameters]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(translate(sql), rows)
