"""The store: what the harness reads and writes (runtime.store.interface.StoreAPI),
over an engine: an SQLite file (runtime.store.sqlite_engine, the default) or a
PostgreSQL database (runtime.store.pg).

Every mutation is one transaction that runs whole on the engine's writer
thread: a synchronous body (`Tx`) whose statements run at once, so each
state change is a compare-and-set decided by its row count, and whose ledger
events and new conversation version commit with it. Because the whole
transaction runs in the thread, a caller cancelled while it waits cannot leave
the connection inside a transaction: a job not yet begun is dropped, one that
began finishes (commit or rollback) and its events are still published.

A driver's transactions carry its fencing token; a token that is no longer the
conversation's lease token rolls the transaction back with `LeaseLost`. The
SELECT that checks it locks the conversation's row where the engine runs
writers at once (PostgreSQL), so no other owner can take the lease before the
transaction commits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.model.errors import (
    ConversationExists,
    LeaseLost,
    NotIdle,
    SessionFailedError,
    StoreError,
    UnfinishedWork,
    UnknownConversation,
)
from runtime.model.events import ConversationCreated, DurableEvent, LeaseChanged
from runtime.model.records import (
    Conversation,
    Entry,
    InboxItem,
    Run,
    SessionSummary,
    ToolCallRecord,
)
from runtime.model.rules import Rule
from runtime.store import blobs, ledger, sessions
from runtime.store.dialect import Db, Dialect, dialect_of
from runtime.store.location import is_url
from runtime.store.marks import NO_BOUND
from runtime.store.rows import CONVERSATION_COLUMNS, conversation_row
from runtime.store.sqlite_engine import SqliteEngine
from runtime.store.todos import stored_todos
from runtime.store.tx import (
    ENTRY_COLUMNS,
    INBOX_COLUMNS,
    RUN_COLUMNS,
    TOOL_COLUMNS,
    Tx,
    entry_row,
    inbox_row,
    joined_chunks,
    run_row,
    session_rules,
    tool_call_row,
)
from runtime.store.values import ForkHook as ForkHook
from runtime.store.values import LeaseInfo as LeaseInfo
from runtime.store.values import RunStart as RunStart
from runtime.store.values import Snapshot as Snapshot

if TYPE_CHECKING:
    from runtime.model.results import SearchHit
    from runtime.store.interface import Engine, StoreAPI

T = TypeVar("T")
log = logging.getLogger(__name__)


class Store:
    """The durable store (runtime.store.interface.StoreAPI) over one engine: SQLite's
    file (the default) or a PostgreSQL database (runtime.store.pg)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        #: The SQLite file (None on PostgreSQL); `where` names the store in messages.
        self.path = engine.path
        self.where = engine.where
        self.dialect = engine.dialect
        self._closed = False
        #: The storage error that failed this store (seed 004: it ends the harness): from
        #: then on every read and write is refused with it at once, nothing touching the
        #: database. `on_failure` hears of it once (the Harness closes itself then).
        self.failure: SessionFailedError | None = None
        self.on_failure: Callable[[SessionFailedError], None] | None = None

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> Store:
        """The store at `path`: an SQLite file, or a `postgresql://` URL."""
        location = os.fspath(path)
        if is_url(location):
            from runtime.store.pg.engine import PgEngine

            return cls(await PgEngine.open(location))
        return cls(await SqliteEngine.open(Path(location)))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._engine.close()

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise StoreError("the store is closed")

    def _failed(self, exc: StoreError) -> None:
        """A read or write met a storage error (the engine's: a full disk, an I/O error, a
        lock held past the timeout, a damaged page, a dropped connection; never a
        compare-and-set that lost, which is a row count): the store fails, once."""
        if self.failure is not None or not self._engine.storage_error(exc):
            return
        self.failure = SessionFailedError.of(exc)
        self.failure.__cause__ = exc  # (its traceback says which read or write met it)
        self._engine.stop_waiting()
        if self.on_failure is not None:
            self.on_failure(self.failure)

    async def _guarded(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except StoreError as exc:
            self._failed(exc)
            raise

    # --- writes -----------------------------------------------------------

    async def _write(
        self, body: Callable[[Db], T], on_done: Callable[[T], None] | None = None
    ) -> T:
        self._check_usable()
        return await self._guarded(self._engine.write(body, on_done, self._check_usable))

    async def transact(
        self,
        conversation_id: str,
        body: Callable[[Tx], T],
        *,
        token: int | None = None,
        publish: Callable[[DurableEvent], None] | None = None,
        after: Callable[[T], None] | None = None,
    ) -> T:
        """Run `body` in one transaction of `conversation_id`. When it has committed,
        `after(result)` runs, then its events are published, even if the caller was
        cancelled meanwhile. With `token`, the transaction is refused (LeaseLost)
        unless the token is still the conversation's lease token."""

        def run(db: Db) -> tuple[T, list[DurableEvent]]:
            tx = _open_tx(db, conversation_id, token, self.dialect)
            result = body(tx)
            tx.finish()
            return result, tx.events

        def done(out: tuple[T, list[DurableEvent]]) -> None:
            if after is not None:
                after(out[0])
            if publish is not None:
                for event in out[1]:
                    publish(event)

        result, _ = await self._write(run, done)
        return result

    async def create_conversation(
        self,
        conversation: Conversation,
        then: Callable[[Tx], T] | None = None,
        *,
        publish: Callable[[DurableEvent], None] | None = None,
    ) -> tuple[Conversation, T | None]:
        """Insert `conversation` and, in the same transaction, run `then` (its first prompt)."""
        created = conversation.but(version=1)

        def run(db: Db) -> tuple[T | None, list[DurableEvent]]:
            tx, first = _insert_conversation(db, created)
            result = then(tx) if then is not None else None
            tx.finish()
            return result, [first, *tx.events]

        def done(out: tuple[T | None, list[DurableEvent]]) -> None:
            if publish is not None:
                for event in out[1]:
                    publish(event)

        result, _ = await self._write(run, done)
        return created, result

    async def fork_conversation(
        self,
        source_id: str,
        new_id: str,
        at: Callable[[list[Entry]], int],
        *,
        publish: Callable[[DurableEvent], None] | None = None,
        also: ForkHook | None = None,
    ) -> Conversation:
        """A new conversation `new_id` sharing the history of `source_id` up to the
        position `at(source entries)` returns, created and copied in one transaction
        (the source is only read). `also` copies more in that transaction (the
        subagents of the copied calls, runtime.agents) and returns its events."""

        def run(db: Db) -> tuple[Conversation, list[DurableEvent]]:
            probe = Tx(db, source_id, 0)
            source, entries = sessions.read_source(probe, source_id)
            position = at(entries)
            history = sessions.history_until(probe, source_id, entries, position)
            created = sessions.forked_conversation(source, new_id, position).but(version=1)
            tx, first = _insert_conversation(db, created)
            copied = sessions.copy_history(tx, history, with_effects=True)
            more = also(tx, copied, lambda c: _insert_conversation(db, c)) if also else []
            tx.finish()
            return created.but(version=tx.version), [first, *tx.events, *more]

        def done(out: tuple[Conversation, list[DurableEvent]]) -> None:
            if publish is not None:
                for event in out[1]:
                    publish(event)

        conversation, _ = await self._write(run, done)
        return conversation

    async def delete_conversation(
        self, conversation_id: str, *, force: bool = False, live: Callable[[LeaseInfo], bool]
    ) -> None:
        """Delete everything of a conversation and keep its id from being used again.

        Refused (UnfinishedWork) while it has unfinished runs or queued input, or a
        live driver, unless `force`."""

        def run(db: Db) -> None:
            row = db.execute(
                "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
                "FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            if row is None:
                raise UnknownConversation(
                    f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
                )
            if not force:
                _refuse_unfinished(db, conversation_id, _lease(row, store_clock(db)), live)
            # Its subagents' conversations (runtime.agents) go with it, whole trees.
            for (gone,) in db.execute(DESCENDANTS_AND_SELF, (conversation_id,)).fetchall():
                db.execute("DELETE FROM conversations WHERE id = ?", (gone,))
                db.execute("DELETE FROM ledger WHERE conversation_id = ?", (gone,))
                db.execute("DELETE FROM ledger_marks WHERE conversation_id = ?", (gone,))
                db.execute(
                    "INSERT INTO deleted_conversations (id, deleted_at) VALUES (?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (gone, time.time()),
                )
            blobs.reclaim(db)  # the kept file bytes no other conversation names

        await self._write(run)

    # --- admission ----------------------------------------------------------

    async def admission(self, request_key: str) -> tuple[str, str, str] | None:
        """(conversation id, inbox item id, digest) admitted under `request_key`, if any."""
        rows = await self._fetchall(
            "SELECT conversation_id, inbox_id, digest FROM admissions WHERE request_key = ?",
            (request_key,),
        )
        if not rows:
            return None
        conversation_id, inbox_id, digest = rows[0]
        return str(conversation_id), str(inbox_id), str(digest)

    # --- lease ------------------------------------------------------------

    async def try_acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        pid: int,
        host: str,
        can_take: Callable[[LeaseInfo], bool],
        publish: Callable[[DurableEvent], None] | None = None,
    ) -> tuple[LeaseInfo, bool]:
        """Take the lease if free or `can_take(current)`; returns (lease now, taken)."""

        def body(tx: Tx) -> tuple[LeaseInfo, bool]:
            row = tx.rows(
                "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
                "FROM conversations WHERE id = ?",
                (conversation_id,),
            )[0]
            now = store_clock(tx.db)
            current = _lease(row, now)
            if current.owner is not None and current.owner != owner and not can_take(current):
                return current, False
            token = current.token + 1
            if not tx.execute(
                "UPDATE conversations SET lease_owner = ?, lease_pid = ?, lease_host = ?, "
                "lease_heartbeat = ?, lease_token = ? WHERE id = ? AND lease_token = ?",
                (owner, pid, host, now, token, conversation_id, current.token),
            ):
                return current, False
            tx.emit(lambda v: LeaseChanged(conversation_id, v, owner, pid, token))
            return LeaseInfo(owner, pid, host, now, token, now), True

        return await self.transact(conversation_id, body, publish=publish)

    async def heartbeat(self, conversation_id: str, token: int) -> bool:
        """Refresh the lease; false if the token is no longer current. Not a ledger event."""

        def body(db: Db) -> bool:
            cur = db.execute(
                "UPDATE conversations SET lease_heartbeat = ? WHERE id = ? AND lease_token = ?",
                (store_clock(db), conversation_id, token),
            )
            return cur.rowcount == 1

        return await self._write(body)

    async def park_lease(
        self,
        conversation_id: str,
        token: int,
        owner: str,
        pid: int,
        host: str,
        publish: Callable[[DurableEvent], None] | None = None,
    ) -> LeaseInfo:
        """Hand the lease held with `token` to a parked owner (runtime.run.driver:
        `PARKED`), with the next token, in one transaction that also finds the
        conversation idle: NotIdle when it has a run unfinished or input queued (an
        approval pending is a run awaiting it), LeaseLost when `token` is not current."""

        def body(tx: Tx) -> LeaseInfo:
            if tx.rows(_UNFINISHED, (conversation_id, conversation_id))[0][0]:
                raise NotIdle(
                    f"conversation {conversation_id} has work going (a run or queued input)",
                    hint="it parks once that ends and the session stays idle",
                )
            now = store_clock(tx.db)
            if not tx.execute(
                "UPDATE conversations SET lease_owner = ?, lease_pid = ?, lease_host = ?, "
                "lease_heartbeat = ?, lease_token = ? WHERE id = ? AND lease_token = ?",
                (owner, pid, host, now, token + 1, conversation_id, token),
            ):
                raise LeaseLost(f"conversation {conversation_id} was taken over by another process")
            tx.emit(lambda v: LeaseChanged(conversation_id, v, owner, pid, token + 1))
            return LeaseInfo(owner, pid, host, now, token + 1, now)

        return await self.transact(conversation_id, body, token=token, publish=publish)

    async def release_lease(
        self,
        conversation_id: str,
        token: int,
        publish: Callable[[DurableEvent], None] | None = None,
    ) -> bool:
        def body(tx: Tx) -> None:
            tx.execute(
                "UPDATE conversations SET lease_owner = NULL, lease_pid = NULL, "
                "lease_host = NULL, lease_heartbeat = NULL WHERE id = ?",
                (conversation_id,),
            )
            tx.emit(lambda v: LeaseChanged(conversation_id, v, None, None, token))

        try:
            await self.transact(conversation_id, body, token=token, publish=publish)
            return True
        except (LeaseLost, UnknownConversation):
            return False

    # --- reads ------------------------------------------------------------

    async def _read(self, fn: Callable[[Db], T]) -> T:
        self._check_usable()
        return await self._guarded(self._engine.read(fn))

    async def read(self, fn: Callable[[Db], T]) -> T:
        """Run `fn(db)` in one read transaction on the reader thread."""
        return await self._read(fn)

    async def open_tool_calls(self, run_id: str) -> list[ToolCallRecord]:
        """The calls of `run_id` still pending or running, in order."""
        rows = await self._fetchall(
            f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE run_id = ? "
            "AND state IN ('pending', 'running') ORDER BY \"index\"",
            (run_id,),
        )
        return [tool_call_row(r) for r in rows]

    async def _fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return await self._read(lambda db: db.execute(sql, params).fetchall())

    async def get_conversation(self, conversation_id: str) -> Conversation:
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        )
        if not rows:
            raise UnknownConversation(
                f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
            )
        return conversation_row(rows[0])

    async def exists(self, conversation_id: str) -> bool:
        rows = await self._fetchall("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
        return bool(rows)

    async def deleted(self, conversation_id: str) -> bool:
        """Was a conversation with this id deleted? (Its id is never used again.)"""
        rows = await self._fetchall(
            "SELECT 1 FROM deleted_conversations WHERE id = ?", (conversation_id,)
        )
        return bool(rows)

    async def version(self, conversation_id: str) -> int:
        rows = await self._fetchall(
            "SELECT version FROM conversations WHERE id = ?", (conversation_id,)
        )
        if not rows:
            raise UnknownConversation(f"no conversation {conversation_id}")
        return int(rows[0][0])

    async def lease(self, conversation_id: str) -> LeaseInfo:
        def read(db: Db) -> LeaseInfo | None:
            row = db.execute(
                "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
                "FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            return _lease(row, store_clock(db)) if row is not None else None

        found = await self._read(read)
        if found is None:
            raise UnknownConversation(f"no conversation {conversation_id}")
        return found

    async def run(self, run_id: str) -> Run | None:
        rows = await self._fetchall(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        return run_row(rows[0]) if rows else None

    async def inbox_item(self, item_id: str) -> InboxItem | None:
        rows = await self._fetchall(f"SELECT {INBOX_COLUMNS} FROM inbox WHERE id = ?", (item_id,))
        return inbox_row(rows[0]) if rows else None

    async def tool_call(self, call_id: str) -> ToolCallRecord | None:
        rows = await self._fetchall(
            f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE id = ?", (call_id,)
        )
        return tool_call_row(rows[0]) if rows else None

    async def session_rules(self, conversation_id: str) -> tuple[Rule, ...]:
        """The conversation's session approval rules, oldest first."""
        return await self._read(lambda db: session_rules(db, conversation_id))

    async def unfinished(self, conversation_id: str) -> bool:
        """Does the conversation have an unfinished run or queued input?"""
        rows = await self._fetchall(_UNFINISHED, (conversation_id, conversation_id))
        return bool(rows[0][0])

    async def latest_run(self, conversation_id: str) -> Run | None:
        rows = await self._fetchall(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id = ? "
            "ORDER BY created_at DESC, id DESC LIMIT 1",
            (conversation_id,),
        )
        return run_row(rows[0]) if rows else None

    async def list_conversations(
        self, cwd: str | None = None, limit: int = 200, *, with_entries: bool = False
    ) -> list[Conversation]:
        clauses, params = ["c.task_parent_id IS NULL"], []  # children show under their parent
        from runtime.store.surrogates import utf8

        if cwd is not None and not utf8(cwd):
            return []  # no session is kept in a folder whose path is not UTF-8
        if cwd is not None:
            clauses.append("cwd = ?")
            params.append(cwd)
        if with_entries:
            clauses.append("EXISTS (SELECT 1 FROM entries e WHERE e.conversation_id = c.id)")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations c {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [conversation_row(r) for r in rows]

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Conversations whose entries match `query` (the engine's full-text search:
        FTS5 and bm25, or tsvector and ts_rank), best first."""
        return await self._read(lambda db: self._engine.search(db, query, limit))

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]:
        """The newest `limit` conversations that have entries, each with its entry count."""
        rows = await self._fetchall(
            f"SELECT {CONVERSATION_COLUMNS}, "
            "(SELECT COUNT(*) FROM entries e WHERE e.conversation_id = c.id) "
            "FROM conversations c WHERE c.task_parent_id IS NULL "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [SessionSummary(conversation_row(r[:-1]), r[-1]) for r in rows if r[-1]]

    async def snapshot(self, conversation_id: str, last: int | None = None) -> Snapshot:
        """Everything about one conversation, read in one read transaction; a streaming
        entry's text (and reasoning) is its checkpointed chunks, joined. `last`: only
        the last `last` entries and their tool calls (`Snapshot.earlier` counts the rest)."""
        snap = await self._read(lambda db: read_snapshot(db, conversation_id, last))
        if snap is None:
            raise UnknownConversation(
                f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
            )
        return snap

    async def run_start(self, conversation_id: str, run_id: str) -> RunStart:
        """The conversation, its entries (a streaming entry's chunks joined), run
        `run_id` and its tool calls, read in one read transaction."""
        start = await self._read(lambda db: _read_run_start(db, conversation_id, run_id))
        if start is None:
            raise UnknownConversation(
                f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
            )
        return start

    async def ledger(
        self,
        conversation_id: str,
        after: int = 0,
        limit: int = 10_000,
        before: int = NO_BOUND,
    ) -> list[DurableEvent]:
        """Events after version `after` and before `before`, at most `limit`."""
        return await self._read(lambda db: ledger.read(db, conversation_id, after, limit, before))


#: A conversation and every subagent conversation below it (runtime.agents), children
#: before their parent.
DESCENDANTS_AND_SELF = (
    "WITH RECURSIVE tree (id, depth) AS (SELECT CAST(? AS TEXT), 0 UNION ALL "
    "SELECT c.id, tree.depth + 1 "
    "FROM conversations c JOIN tree ON c.task_parent_id = tree.id WHERE tree.depth < 16) "
    "SELECT id FROM tree ORDER BY depth DESC"
)

_UNFINISHED = (
    "SELECT EXISTS (SELECT 1 FROM runs WHERE conversation_id = ? AND state IN "
    "('queued', 'running', 'awaiting_approval')) OR EXISTS (SELECT 1 FROM inbox "
    "WHERE conversation_id = ? AND state = 'queued')"
)

# A conversation's entries, runs, inbox and tool calls, each in order.
_ENTRIES = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? ORDER BY position"
_RUNS = f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY created_at, id"
_INBOX = f"SELECT {INBOX_COLUMNS} FROM inbox WHERE conversation_id = ? ORDER BY created_at, id"
_CALLS = (
    f'SELECT {TOOL_COLUMNS} FROM tool_calls WHERE conversation_id = ? ORDER BY created_at, "index"'
)


# The last N entries (`snapshot(last=N)`), and the tool calls those entries made.
_LAST_ENTRIES = (
    f"SELECT {ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? ORDER BY position DESC LIMIT ?"
)
_LAST_CALLS = (
    f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE conversation_id = ? AND entry_id IN"
    " (SELECT id FROM entries WHERE conversation_id = ? ORDER BY position DESC LIMIT ?)"
    ' ORDER BY created_at, "index"'
)


def read_snapshot(db: Db, conversation_id: str, last: int | None = None) -> Snapshot | None:
    row = db.execute(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        return None
    key = (conversation_id,)
    runs, inbox = db.execute(_RUNS, key).fetchall(), db.execute(_INBOX, key).fetchall()
    earlier = 0
    if last is None:
        entries = db.execute(_ENTRIES, key).fetchall()
        calls = db.execute(_CALLS, key).fetchall()
    else:
        entries = db.execute(_LAST_ENTRIES, (conversation_id, last)).fetchall()[::-1]
        calls = db.execute(_LAST_CALLS, (conversation_id, conversation_id, last)).fetchall()
        (count,) = db.execute(
            "SELECT COUNT(*) FROM entries WHERE conversation_id = ?", key
        ).fetchone()
        earlier = count - len(entries)
    return Snapshot(
        conversation_row(row),
        tuple(_with_chunks(db, entry_row(r)) for r in entries),
        tuple(run_row(r) for r in runs),
        tuple(inbox_row(r) for r in inbox),
        tuple(tool_call_row(r) for r in calls),
        session_rules(db, conversation_id),
        earlier,
        stored_todos(db, conversation_id),
    )


def _read_run_start(db: Db, conversation_id: str, run_id: str) -> RunStart | None:
    row = db.execute(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        return None
    # Rows are decoded as they are stepped, so a long conversation is never held twice.
    entries = tuple(
        _with_chunks(db, entry_row(r)) for r in db.execute(_ENTRIES, (conversation_id,))
    )
    run = db.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    calls = db.execute(
        f'SELECT {TOOL_COLUMNS} FROM tool_calls WHERE run_id = ? ORDER BY created_at, "index"',
        (run_id,),
    ).fetchall()
    return RunStart(
        conversation_row(row),
        entries,
        run_row(run) if run is not None else None,
        tuple(tool_call_row(r) for r in calls),
    )


def _with_chunks(db: Db, entry: Entry) -> Entry:
    if entry.status != "streaming":
        return entry
    text = joined_chunks(db, entry.id, "text")
    reasoning = joined_chunks(db, entry.id, "reasoning")
    data = {**entry.data, "reasoning": reasoning} if reasoning else entry.data
    return entry.but(text=entry.text + text, data=data)


def _insert_conversation(db: Db, created: Conversation) -> tuple[Tx, DurableEvent]:
    """Insert a new conversation at version 1 (its ConversationCreated event written);
    the Tx goes on from there. Refused if the id belonged to a deleted conversation."""
    if db.execute("SELECT 1 FROM deleted_conversations WHERE id = ?", (created.id,)).fetchone():
        raise UnknownConversation(
            f"conversation {created.id} was deleted; its id is not used again",
            hint="start a new session without --session-id, or pick another id",
        )
    inserted = db.execute(
        f"INSERT INTO conversations ({CONVERSATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (
            created.id,
            created.title,
            created.cwd,
            json.dumps(created.settings),
            created.created_at,
            created.updated_at,
            created.parent_id,
            created.fork_seq,
            1,
        ),
    )
    if inserted.rowcount != 1:  # (decided here, by the row count: not by a read before)
        raise ConversationExists(
            f"conversation {created.id} was created meanwhile by another process",
            hint=f"continue it with `bastion -r {created.id}`",
        )
    first = ConversationCreated(created.id, 1, created)
    db.execute(ledger.INSERT, ledger.row(first))
    return Tx(db, created.id, 1), first


def _open_tx(db: Db, conversation_id: str, token: int | None, dialect: Dialect) -> Tx:
    """The conversation's transaction, its row locked where writers run at once (the
    dialect's FOR UPDATE), so the token checked here is the token when it commits."""
    row = db.execute(
        "SELECT version, lease_token FROM conversations WHERE id = ?" + dialect.for_update,
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise UnknownConversation(
            f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
        )
    if token is not None and row[1] != token:
        raise LeaseLost(
            f"conversation {conversation_id} was taken over by another process",
            hint="this process stopped driving it; nothing it had not committed was kept",
        )
    return Tx(db, conversation_id, row[0])


def _refuse_unfinished(
    db: Db,
    conversation_id: str,
    lease: LeaseInfo,
    live: Callable[[LeaseInfo], bool],
) -> None:
    busy = db.execute(_UNFINISHED, (conversation_id, conversation_id)).fetchone()[0]
    if lease.owner is not None and live(lease):
        raise UnfinishedWork(
            f"conversation {conversation_id} is being driven by a live bastion (pid {lease.pid})",
            hint="stop that process first, or pass --force",
        )
    if busy:
        raise UnfinishedWork(
            f"conversation {conversation_id} has unfinished work (a run or queued input)",
            hint=f"finish it with `bastion -p --resume {conversation_id}`, or pass --force",
        )


def _lease(row: Any, clock: float) -> LeaseInfo:
    """A lease from its row (owner, pid, host, heartbeat, token), read at `clock`."""
    owner, pid, host, heartbeat, token = row
    return LeaseInfo(owner, pid, host, heartbeat, token, clock)


def store_clock(db: Db) -> float:
    """Now, by the clock leases are kept by: the server's on PostgreSQL (machines that
    share it agree on it, however their own clocks are set), this machine's on SQLite."""
    query = dialect_of(db).clock
    return float(db.execute(query).fetchone()[0]) if query else time.time()


def request_digest(text: str, mode: str) -> str:
    """What a request key stands for: the same key must come with the same input."""
    return hashlib.sha256(f"{mode}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


def remove_artifacts(directory: Path) -> None:
    """Delete a conversation's spilled command output (none is fine)."""
    if directory.exists():
        shutil.rmtree(directory)


if TYPE_CHECKING:

    def _is_store_api(store: Store) -> StoreAPI:  # (mypy: Store keeps the interface)
        return store
