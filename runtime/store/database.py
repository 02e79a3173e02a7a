"""The SQLite store: one file, WAL, a writer thread and a reader thread per process.

Every mutation is one `BEGIN IMMEDIATE` transaction that runs whole on the
writer thread: a synchronous body (`Tx`) whose statements run at once, so each
state change is a compare-and-set decided by its row count, and whose ledger
events and new conversation version commit with it. Because the whole
transaction runs in the thread, a caller cancelled while it waits cannot leave
the connection inside a transaction: a job not yet begun is dropped, one that
began finishes (commit or rollback) and its events are still published.

A driver's transactions carry its fencing token; a token that is no longer the
conversation's lease token rolls the transaction back with `LeaseLost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.model.errors import (
    LeaseLost,
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
from runtime.model.todo import TodoItem, stored_todos
from runtime.store import blobs, failpoints, ledger, sessions, storefile
from runtime.store.rows import CONVERSATION_COLUMNS, conversation_row
from runtime.store.threads import Connection as _Connection
from runtime.store.threads import Job
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

if TYPE_CHECKING:
    from runtime.model.results import SearchHit

T = TypeVar("T")
log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 10_000
PAGE_SIZE = 16_384
_BUSY_STEP_MS = 50  # the writer waits for another process's lock in steps, to stay cancellable


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything stored about one conversation, read in one transaction."""

    conversation: Conversation
    entries: tuple[Entry, ...]
    runs: tuple[Run, ...]
    inbox: tuple[InboxItem, ...]
    tool_calls: tuple[ToolCallRecord, ...]
    rules: tuple[Rule, ...] = ()
    # Entries before `entries` left out (`snapshot(last=N)`), with their tool calls.
    earlier: int = 0
    todos: tuple[TodoItem, ...] = ()  # the model's checklist (runtime.plan)


@dataclass(frozen=True, slots=True)
class RunStart:
    """What a run reads once when it starts, in one read transaction: the conversation,
    its entries, the run itself and the run's tool calls (not the other runs or inbox)."""

    conversation: Conversation
    entries: tuple[Entry, ...]
    run: Run | None
    tool_calls: tuple[ToolCallRecord, ...]


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    owner: str | None
    pid: int | None
    host: str | None
    heartbeat: float | None
    token: int


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """What `exc` means for a person: locked (by pid when known), read-only, full, corrupt."""
    return storefile.explain(path, exc, waited=BUSY_TIMEOUT_MS / 1000)


class Store:
    """Async access to one Bastion database file."""

    def __init__(self, path: Path, writer: _Connection, reader: _Connection) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False
        self._cancel_waits = threading.Event()
        #: The storage error that failed this store (seed 004: it ends the harness): from
        #: then on every read and write is refused with it at once, nothing touching the
        #: file. `on_failure` hears of it once (the Harness closes itself then).
        self.failure: SessionFailedError | None = None
        self.on_failure: Callable[[SessionFailedError], None] | None = None

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> Store:
        file = Path(path)
        await asyncio.to_thread(storefile.prepare_file, file, BUSY_TIMEOUT_MS, PAGE_SIZE)
        try:
            writer = await asyncio.to_thread(_Connection, file, "bastion-writer", _BUSY_STEP_MS)
            reader = await asyncio.to_thread(_Connection, file, "bastion-reader", BUSY_TIMEOUT_MS)
        except sqlite3.Error as exc:
            raise _store_error(file, exc) from exc
        return cls(file, writer, reader)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cancel_waits.set()
        await asyncio.gather(self._writer.close(), self._reader.close())

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise StoreError("the store is closed")

    def _failed(self, exc: StoreError) -> None:
        """A read or write met a storage error (SQLite's: a full disk, an I/O error, a
        lock held past the timeout, a damaged page; never a compare-and-set that lost,
        which is a row count): the store fails, once."""
        if self.failure is not None or not isinstance(exc.__cause__, sqlite3.Error):
            return
        self.failure = SessionFailedError.of(exc)
        self._cancel_waits.set()
        if self.on_failure is not None:
            self.on_failure(self.failure)

    async def _guarded(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except StoreError as exc:
            self._failed(exc)
            raise

    # --- writes -----------------------------------------------------------

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

    def _in_transaction(self, body: Callable[[sqlite3.Connection], T], job: Job) -> T:
        db = self._writer.db
        self._check_usable()  # (failed while this job waited its turn: nothing is written)
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

    async def _write(
        self, body: Callable[[sqlite3.Connection], T], on_done: Callable[[T], None] | None = None
    ) -> T:
        self._check_usable()
        return await self._guarded(
            self._writer.run(lambda job: self._in_transaction(body, job), on_done)
        )

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

        def run(db: sqlite3.Connection) -> tuple[T, list[DurableEvent]]:
            tx = _open_tx(db, conversation_id, token)
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

        def run(db: sqlite3.Connection) -> tuple[T | None, list[DurableEvent]]:
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

        def run(db: sqlite3.Connection) -> tuple[Conversation, list[DurableEvent]]:
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

        def run(db: sqlite3.Connection) -> None:
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
                _refuse_unfinished(db, conversation_id, LeaseInfo(*row), live)
            # Its subagents' conversations (runtime.agents) go with it, whole trees.
            for (gone,) in db.execute(DESCENDANTS_AND_SELF, (conversation_id,)).fetchall():
                db.execute("DELETE FROM conversations WHERE id = ?", (gone,))
                db.execute("DELETE FROM ledger WHERE conversation_id = ?", (gone,))
                db.execute("DELETE FROM ledger_marks WHERE conversation_id = ?", (gone,))
                db.execute(
                    "INSERT OR IGNORE INTO deleted_conversations (id, deleted_at) VALUES (?, ?)",
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
            current = LeaseInfo(*row)
            if current.owner is not None and current.owner != owner and not can_take(current):
                return current, False
            token, now = current.token + 1, time.time()
            tx.execute(
                "UPDATE conversations SET lease_owner = ?, lease_pid = ?, lease_host = ?, "
                "lease_heartbeat = ?, lease_token = ? WHERE id = ? AND lease_token = ?",
                (owner, pid, host, now, token, conversation_id, current.token),
            )
            tx.emit(lambda v: LeaseChanged(conversation_id, v, owner, pid, token))
            return LeaseInfo(owner, pid, host, now, token), True

        return await self.transact(conversation_id, body, publish=publish)

    async def heartbeat(self, conversation_id: str, token: int) -> bool:
        """Refresh the lease; false if the token is no longer current. Not a ledger event."""

        def body(db: sqlite3.Connection) -> bool:
            cur = db.execute(
                "UPDATE conversations SET lease_heartbeat = ? WHERE id = ? AND lease_token = ?",
                (time.time(), conversation_id, token),
            )
            return cur.rowcount == 1

        return await self._write(body)

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

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_usable()

        def run(_: Job) -> T:
            db = self._reader.db
            try:
                db.execute("BEGIN")
                try:
                    return fn(db)
                finally:
                    db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc

        return await self._guarded(self._reader.run(run))

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
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
        rows = await self._fetchall(
            "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
            "FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise UnknownConversation(f"no conversation {conversation_id}")
        return LeaseInfo(*rows[0])

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
        """Conversations whose entries match `query` (FTS5, bm25), best first."""
        from runtime.store import fulltext

        return await self._read(lambda db: fulltext.search(db, query, limit))

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
        self, conversation_id: str, after: int = 0, limit: int = 10_000
    ) -> list[DurableEvent]:
        return await self._read(lambda db: ledger.read(db, conversation_id, after, limit))


#: More for a fork's transaction: (the fork's Tx, old ids -> copied ones, a way to insert
#: another new conversation) -> the events of what it wrote elsewhere.
ForkHook = Callable[
    [Tx, dict[str, str], Callable[[Conversation], tuple[Tx, DurableEvent]]], list[DurableEvent]
]

#: A conversation and every subagent conversation below it (runtime.agents), children
#: before their parent.
DESCENDANTS_AND_SELF = (
    "WITH RECURSIVE tree (id, depth) AS (SELECT ?, 0 UNION ALL SELECT c.id, tree.depth + 1 "
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


def read_snapshot(
    db: sqlite3.Connection, conversation_id: str, last: int | None = None
) -> Snapshot | None:
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


def _read_run_start(db: sqlite3.Connection, conversation_id: str, run_id: str) -> RunStart | None:
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


def _with_chunks(db: sqlite3.Connection, entry: Entry) -> Entry:
    if entry.status != "streaming":
        return entry
    text = joined_chunks(db, entry.id, "text")
    reasoning = joined_chunks(db, entry.id, "reasoning")
    data = {**entry.data, "reasoning": reasoning} if reasoning else entry.data
    return entry.but(text=entry.text + text, data=data)


def _insert_conversation(db: sqlite3.Connection, created: Conversation) -> tuple[Tx, DurableEvent]:
    """Insert a new conversation at version 1 (its ConversationCreated event written);
    the Tx goes on from there. Refused if the id belonged to a deleted conversation."""
    if db.execute("SELECT 1 FROM deleted_conversations WHERE id = ?", (created.id,)).fetchone():
        raise UnknownConversation(
            f"conversation {created.id} was deleted; its id is not used again",
            hint="start a new session without --session-id, or pick another id",
        )
    db.execute(
        f"INSERT INTO conversations ({CONVERSATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    first = ConversationCreated(created.id, 1, created)
    db.execute(ledger.INSERT, ledger.row(first))
    return Tx(db, created.id, 1), first


def _open_tx(db: sqlite3.Connection, conversation_id: str, token: int | None) -> Tx:
    row = db.execute(
        "SELECT version, lease_token FROM conversations WHERE id = ?", (conversation_id,)
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
    db: sqlite3.Connection,
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


def request_digest(text: str, mode: str) -> str:
    """What a request key stands for: the same key must come with the same input."""
    return hashlib.sha256(f"{mode}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


def remove_artifacts(directory: Path) -> None:
    """Delete a conversation's spilled command output (none is fine)."""
    if directory.exists():
        shutil.rmtree(directory)
