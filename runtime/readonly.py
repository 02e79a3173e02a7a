"""The store opened read-only, for commands that only look: `bastion sessions`,
`sessions search`, and finding the session an id prefix names.

A plain SELECT does not need the harness (asyncio, the writer, the migrations, the
driver): `ReadOnlyStore.open()` is one `sqlite3` connection in `mode=ro` and the same
queries the store runs (`runtime.fulltext`, `runtime.shortids`), so its answers are
the harness's. It opens only a store this build can read as it stands: when the file
is missing, has another schema version (older: the harness migrates it; newer: the
harness refuses it in one line) or cannot be read, `open()` returns None and the
caller goes through the harness, which creates, migrates or reports it.

Imports: the standard library, records and errors; the query modules when a query
needs them; nothing that starts a thread or a loop. Nothing here writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from runtime.errors import StoreError
from runtime.home import STORE_NAME, default_home
from runtime.rows import CONVERSATION_COLUMNS, conversation_row

if TYPE_CHECKING:
    from runtime.fulltext import SearchHit
    from runtime.records import Conversation

__all__ = ["ReadOnlyStore"]

#: How long a read waits for a writer's lock (only a checkpoint of the WAL takes one).
_BUSY_SECONDS = 5.0


class ReadOnlyStore:
    """One read-only connection to the store; a context manager that closes it."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    def open(cls, home: Path | None = None) -> ReadOnlyStore | None:
        """The store under `home` (default: `default_home()`), or None when the harness
        must open it instead (missing, another schema version, unreadable)."""
        path = (home or default_home()) / STORE_NAME
        if not path.is_file():
            return None
        try:
            db = sqlite3.connect(
                f"{path.as_uri()}?mode=ro", uri=True, timeout=_BUSY_SECONDS, isolation_level=None
            )
        except sqlite3.Error:
            return None
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error:
            db.close()
            return None
        from runtime.migrations import schema_version

        if row is None or int(row[0]) != schema_version():
            db.close()
            return None
        return cls(db, path)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot across its queries)."""
        try:
            self._db.execute("BEGIN")
            try:
                yield self._db
            finally:
                self._db.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot read the store {self.path}: {exc}",
                hint="run `bastion doctor` to check it",
            ) from None

    def list_conversations(self, cwd: str | None = None, limit: int = 200) -> list[Conversation]:
        """The newest `limit` conversations (of `cwd`, when given), newest first: what
        `Harness.list_conversations` returns."""
        where, params = ("WHERE cwd = ?", (cwd,)) if cwd is not None else ("", ())
        with self._read() as db:
            rows = db.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM conversations {where} "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [conversation_row(r) for r in rows]

    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Conversations whose entries match `query`, best first: `Harness.search`."""
        from runtime import fulltext

        with self._read() as db:
            return fulltext.search(db, query, limit)

    def resolve_id(self, text: str) -> str:
        """The id of the one session `text` names: `Harness.resolve_id`."""
        from runtime import shortids

        with self._read() as db:
            return shortids.read_matches(db, text)

    def short_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """Each of `ids` -> the prefix to show for it: `Harness.short_ids`."""
        from runtime import shortids

        with self._read() as db:
            every = shortids.read_ids(db)
        return shortids.short_ids(ids, every)
