"""The store opened read-only, for commands that only look: `bastion sessions`,
`sessions search`, and finding the session an id prefix names.

A plain SELECT does not need the harness (asyncio, the writer, the migrations, the
driver): `ReadOnlyStore.open()` is one `sqlite3` connection in `mode=ro` and the same
queries the store runs (`runtime.store.ftsquery`, `runtime.store.shortids`), so its answers are
the harness's. It opens only a store this build can read as it stands: when the file
is missing, has another schema version (older: the harness migrates it; newer: the
harness refuses it in one line) or cannot be read, `open()` returns None and the
caller goes through the harness, which creates, migrates or reports it.

Its answers are light rows (`SessionRow`, `SessionHit`: the fields a listing shows),
not records: importing dataclasses and the records is most of what such a command
would otherwise load. Imports: the standard library and errors; the query modules
when a query needs them; nothing that starts a thread or a loop. Nothing here writes.
"""

from __future__ import annotations

import os
import sqlite3

from runtime.model.errors import StoreError
from runtime.store.home import STORE_NAME, home_dir, store_elsewhere

# (The session commands load this module: it leaves out typing, contextlib and
# collections, ~5 ms of imports.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType
    from typing import Any

    from runtime.model.records import Conversation

__all__ = ["ReadOnlyStore", "SessionHit", "SessionRow"]

#: How long a read waits for a writer's lock (only a checkpoint of the WAL takes one).
_BUSY_SECONDS = 5.0


#: The first columns of `runtime.store.rows.CONVERSATION_COLUMNS` (a test holds them equal).
_ROW_COLUMNS = "id, title, cwd, settings, created_at, updated_at"
#: A listing's columns, the model read by SQLite: `settings.get("model", "")` (records.py's
#: AgentSettings), without loading json.
_LIST_COLUMNS = (
    "id, title, cwd, created_at, updated_at, CASE WHEN json_type(settings, '$.model') IS NULL"
    " THEN '' ELSE json_extract(settings, '$.model') END"
)


class SessionRow:
    """A conversation as listings show it: id, title, cwd, times and model."""

    __slots__ = ("created_at", "cwd", "id", "model", "title", "updated_at")

    def __init__(
        self, id: str, title: str, cwd: str, created_at: float, updated_at: float, model: str
    ) -> None:
        self.id, self.title, self.cwd, self.model = id, title, cwd, model
        self.created_at, self.updated_at = created_at, updated_at

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> SessionRow:
        """From (id, title, cwd, settings JSON, created_at, updated_at, ...)."""
        import json  # (a search hit's; a listing has SQLite read the model)

        settings = json.loads(row[3])  # AgentSettings' fields, flat (records.py)
        return cls(row[0], row[1], row[2], row[4], row[5], settings.get("model", ""))

    @classmethod
    def of(cls, conv: Conversation) -> SessionRow:
        """The row of a record (what the harness returns)."""
        c = conv
        return cls(c.id, c.title, c.cwd, c.created_at, c.updated_at, c.agent.model)

    def _key(self) -> tuple[Any, ...]:
        return (self.id, self.title, self.cwd, self.created_at, self.updated_at, self.model)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionRow) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"SessionRow{self._key()!r}"


class SessionHit:
    """A search hit as `bastion sessions search` shows it (`SearchHit`'s fields, with
    a SessionRow for its conversation)."""

    __slots__ = ("conversation", "entry_id", "entry_kind", "score", "spans")

    def __init__(
        self,
        conversation: SessionRow,
        entry_id: str,
        entry_kind: str,
        score: float,
        spans: tuple[tuple[str, bool], ...],
    ) -> None:
        self.conversation, self.entry_id, self.entry_kind = conversation, entry_id, entry_kind
        self.score, self.spans = score, spans

    @classmethod
    def make(
        cls,
        row: tuple[Any, ...],
        entry_id: str,
        kind: str,
        score: float,
        spans: tuple[tuple[str, bool], ...],
    ) -> SessionHit:
        return cls(SessionRow.from_row(row), entry_id, kind, score, spans)

    def marked(self, before: str = "[", after: str = "]") -> str:
        return "".join(f"{before}{t}{after}" if hit else t for t, hit in self.spans)

    def _key(self) -> tuple[Any, ...]:
        return (self.conversation, self.entry_id, self.entry_kind, self.score, self.spans)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SessionHit) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"SessionHit{self._key()!r}"


def _uri(path: str) -> str:
    """`path` (absolute) as a read-only SQLite URI: the characters a URI gives meaning
    to are escaped (SQLite decodes %HH in a file: URI)."""
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?mode=ro"


class ReadOnlyStore:
    """One read-only connection to the store; a context manager that closes it."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self._db = db
        self.path = path

    @classmethod
    def open(cls, home: str | os.PathLike[str] | None = None) -> ReadOnlyStore | None:
        """The store under `home` (default: `default_home()`), or None when the harness
        must open it instead (missing, another schema version, unreadable, or the
        user's sessions are in PostgreSQL: runtime.store.home.store_elsewhere)."""
        if home is None and store_elsewhere():
            return None
        path = os.path.join(os.path.abspath(home if home is not None else home_dir()), STORE_NAME)
        if not os.path.isfile(path):
            return None
        try:
            db = sqlite3.connect(_uri(path), uri=True, timeout=_BUSY_SECONDS, isolation_level=None)
        except sqlite3.Error:
            return None
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error:
            db.close()
            return None
        from runtime.store.migrations import schema_version

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

    def _read(self) -> _Snapshot:
        """One read transaction (a consistent snapshot across its queries)."""
        return _Snapshot(self)

    def read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """`fn(connection)` in one read transaction (a consistent snapshot)."""
        with self._read() as db:
            return fn(db)

    def list_conversations(self, cwd: str | None = None, limit: int = 200) -> list[SessionRow]:
        """The newest `limit` conversations (of `cwd`, when given), newest first: what
        `Harness.list_conversations` returns, as rows. Top-level ones only: a subagent's
        conversation is reached from its parent (its `task` row), as in the pickers."""
        where = "WHERE task_parent_id IS NULL"
        params: tuple[str, ...] = ()
        if cwd is not None and not _utf8(cwd):
            return []  # (no session is kept in a folder whose path is not UTF-8)
        if cwd is not None:
            where, params = f"{where} AND cwd = ?", (cwd,)
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_LIST_COLUMNS} FROM conversations {where} "
                "ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [SessionRow(*r) for r in rows]

    def search(self, query: str, limit: int = 50) -> list[SessionHit]:
        """Conversations whose entries match `query`, best first: `Harness.search`, as
        rows."""
        from runtime.store import ftsquery

        with self._read() as db:
            return ftsquery.search(db, query, SessionHit.make, limit)

    def resolve_id(self, text: str) -> str:
        """The id of the one session `text` names: `Harness.resolve_id`."""
        from runtime.store import shortids

        with self._read() as db:
            return shortids.read_matches(db, text)

    def short_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """Each of `ids` -> the prefix to show for it: `Harness.short_ids`."""
        from runtime.store import shortids

        with self._read() as db:
            every = shortids.read_ids(db)
        return shortids.short_ids(ids, every)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Snapshot:
    """`with store._read() as db:` one read transaction on `store`'s connection; a
    sqlite3 error inside it is a StoreError saying what to do."""

    def __init__(self, store: ReadOnlyStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        self._call("BEGIN")
        return self.store._db

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._call("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise self._error(exc) from None

    def _call(self, statement: str) -> None:
        try:
            self.store._db.execute(statement)
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(
            f"cannot read the store {self.store.path}: {exc}",
            hint="run `bastion doctor` to check it",
        )
