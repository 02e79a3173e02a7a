"""The SQLite store: one file, WAL, one writer connection per process.

Every mutation runs in a `BEGIN IMMEDIATE` transaction that also appends its
ledger events and advances the conversation version (= last ledger seq). A
driver's writes carry its fencing token; a token that is no longer the
conversation's current one makes the whole transaction roll back with
`LeaseLost`, so a process whose lease was taken over cannot write late.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from runtime import migrations, storefile
from runtime.errors import LeaseLost, SchemaTooNew, StoreError, UnknownConversation
from runtime.events import (
    ConversationCreated,
    ConversationUpdated,
    DurableEvent,
    EntryAdded,
    EntryTextAppended,
    EntryUpdated,
    InboxUpdated,
    LeaseChanged,
    RunUpdated,
    ToolCallUpdated,
    event_from_dict,
    event_to_dict,
)
from runtime.records import Conversation, Entry, InboxItem, Run, ToolCallRecord

BUSY_TIMEOUT_MS = 10_000

_CONVERSATION_COLUMNS = (
    "id, title, cwd, settings, created_at, updated_at, parent_id, fork_seq, version"
)
_ENTRY_COLUMNS = "id, conversation_id, position, kind, status, text, created_at, run_id, data"
_RUN_COLUMNS = (
    "id, conversation_id, inbox_id, state, created_at, updated_at, revision, reason, error,"
    " usage, result_entry_id"
)
_INBOX_COLUMNS = "id, conversation_id, mode, text, state, created_at, request_key, run_id, entry_id"
_TOOL_COLUMNS = (
    'id, conversation_id, run_id, entry_id, "index", name, arguments, replay_safe, approval,'
    " state, created_at, updated_at, result, result_entry_id"
)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything stored about one conversation, read in one transaction."""

    conversation: Conversation
    entries: tuple[Entry, ...]
    runs: tuple[Run, ...]
    inbox: tuple[InboxItem, ...]
    tool_calls: tuple[ToolCallRecord, ...]


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    owner: str | None
    pid: int | None
    host: str | None
    heartbeat: float | None
    token: int


def _conversation(row: Any) -> Conversation:
    return Conversation(
        id=row[0],
        title=row[1],
        cwd=row[2],
        settings=json.loads(row[3]),
        created_at=row[4],
        updated_at=row[5],
        parent_id=row[6],
        fork_seq=row[7],
        version=row[8],
    )


def _entry(row: Any) -> Entry:
    return Entry(
        id=row[0],
        conversation_id=row[1],
        position=row[2],
        kind=row[3],
        status=row[4],
        text=row[5],
        created_at=row[6],
        run_id=row[7],
        data=json.loads(row[8]),
    )


def _run(row: Any) -> Run:
    return Run(
        id=row[0],
        conversation_id=row[1],
        inbox_id=row[2],
        state=row[3],
        created_at=row[4],
        updated_at=row[5],
        revision=row[6],
        reason=row[7],
        error=json.loads(row[8]) if row[8] else None,
        usage=json.loads(row[9]),
        result_entry_id=row[10],
    )


def _inbox(row: Any) -> InboxItem:
    return InboxItem(*row)


def _tool_call(row: Any) -> ToolCallRecord:
    return ToolCallRecord(
        id=row[0],
        conversation_id=row[1],
        run_id=row[2],
        entry_id=row[3],
        index=row[4],
        name=row[5],
        arguments=row[6],
        replay_safe=bool(row[7]),
        approval=row[8],
        state=row[9],
        created_at=row[10],
        updated_at=row[11],
        result=json.loads(row[12]) if row[12] else None,
        result_entry_id=row[13],
    )


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """What `exc` means for a person: locked (by pid when known), read-only, full, corrupt."""
    return storefile.explain(path, exc, waited=BUSY_TIMEOUT_MS / 1000)


def _prepare_file(path: Path) -> None:
    """Create or migrate the file synchronously, refusing what this build cannot use.

    A home that is a file or read-only is refused before SQLite is asked, so
    nothing is created. A file already at the latest schema is only read, so
    opening never waits for another process's write lock.
    """
    storefile.prepare_directory(path)
    storefile.check_writable(path)
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise _store_error(path, exc) from exc
    try:
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "meta" not in tables:
                raise StoreError(
                    f"{path} is an SQLite file but not a Bastion database",
                    hint="point BASTION_HOME at another directory",
                )
            version = migrations.current_version(db) if "meta" in tables else 0
            latest = migrations.latest_version()
            if version > latest:
                raise SchemaTooNew(
                    f"{path} has schema version {version}, newer than this bastion knows "
                    f"({latest})",
                    hint="upgrade bastion (pip install -U bastion); the file was not changed",
                )
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(
                    f"{path}: cannot switch to WAL journal mode",
                    hint="put BASTION_HOME on a local filesystem",
                )
            if version < latest:
                migrations.ensure_meta(db)
                migrations.apply_pending(db)
        except sqlite3.Error as exc:
            raise _store_error(path, exc) from exc
    finally:
        db.close()


async def _connect(path: Path) -> aiosqlite.Connection:
    conn = await aiosqlite.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    await conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    await conn.execute("PRAGMA synchronous=NORMAL")
    await conn.execute("PRAGMA foreign_keys=ON")
    return conn


class Store:
    """Async access to one Bastion database file."""

    def __init__(self, path: Path, writer: aiosqlite.Connection, reader: aiosqlite.Connection):
        self.path = path
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self._read_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    async def open(cls, path: str | os.PathLike[str]) -> Store:
        file = Path(path)
        await asyncio.to_thread(_prepare_file, file)
        try:
            writer = await _connect(file)
            reader = await _connect(file)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {file}: {exc}") from exc
        return cls(file, writer, reader)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._write_lock:
            await self._writer.close()
        async with self._read_lock:
            await self._reader.close()

    # --- writes -----------------------------------------------------------

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT on the writer; rolled back on any exception.

        SQLite failures (locked past the busy timeout, disk full, I/O) surface as
        StoreError; nothing of the transaction is kept.
        """
        async with self._write_lock:
            db = self._writer
            try:
                await db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
            try:
                yield db
                await db.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    await db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _store_error(self.path, exc) from exc
                raise

    @asynccontextmanager
    async def write(self, conversation_id: str, token: int | None = None) -> AsyncIterator[Tx]:
        """One mutation of one conversation: statements and ledger events commit together.

        With `token`, the transaction is refused (LeaseLost) unless the token is
        still the conversation's lease token.
        """
        async with self._transaction() as db:
            cur = await db.execute(
                "SELECT version, lease_token FROM conversations WHERE id = ?",
                (conversation_id,),
            )
            row = await cur.fetchone()
            if row is None:
                raise UnknownConversation(f"no conversation {conversation_id}")
            if token is not None and row[1] != token:
                raise LeaseLost(
                    f"conversation {conversation_id} was taken over by another process",
                    hint="this process stopped driving it; nothing it had not committed was kept",
                )
            tx = Tx(db, conversation_id, row[0])
            yield tx
            await tx.flush()

    async def create_conversation(self, conversation: Conversation) -> ConversationCreated:
        created = conversation.but(version=1)
        event = ConversationCreated(created.id, 1, created)
        async with self._transaction() as db:
            await db.execute(
                f"INSERT INTO conversations ({_CONVERSATION_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            await db.executemany(_LEDGER_INSERT, [_ledger_row(event)])
        return event

    async def delete_conversation(self, conversation_id: str) -> None:
        async with self._transaction() as db:
            cur = await db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
            if cur.rowcount == 0:
                raise UnknownConversation(f"no conversation {conversation_id}")
            await db.execute("DELETE FROM ledger WHERE conversation_id = ?", (conversation_id,))

    # --- lease ------------------------------------------------------------

    async def try_acquire_lease(
        self,
        conversation_id: str,
        owner: str,
        pid: int,
        host: str,
        can_take: Callable[[LeaseInfo], bool],
    ) -> tuple[LeaseInfo, LeaseChanged | None]:
        """Take the lease if free or `can_take(current)`; returns (lease now, event if taken)."""
        async with self.write(conversation_id) as tx:
            cur = await tx.db.execute(
                "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
                "FROM conversations WHERE id = ?",
                (conversation_id,),
            )
            row = await cur.fetchone()
            assert row is not None
            current = LeaseInfo(row[0], row[1], row[2], row[3], row[4])
            if current.owner is not None and current.owner != owner and not can_take(current):
                return current, None
            token = current.token + 1
            tx.execute(
                "UPDATE conversations SET lease_owner = ?, lease_pid = ?, lease_host = ?, "
                "lease_heartbeat = ?, lease_token = ? WHERE id = ?",
                (owner, pid, host, time.time(), token, conversation_id),
            )
            event = tx.emit(lambda v: LeaseChanged(conversation_id, v, owner, pid, token))
        return LeaseInfo(owner, pid, host, time.time(), token), event  # type: ignore[return-value]

    async def heartbeat(self, conversation_id: str, token: int) -> bool:
        """Refresh the lease; false if the token is no longer current. Not a ledger event."""
        async with self._write_lock:
            cur = await self._writer.execute(
                "UPDATE conversations SET lease_heartbeat = ? WHERE id = ? AND lease_token = ?",
                (time.time(), conversation_id, token),
            )
            return cur.rowcount == 1

    async def release_lease(self, conversation_id: str, token: int) -> LeaseChanged | None:
        try:
            async with self.write(conversation_id, token) as tx:
                tx.execute(
                    "UPDATE conversations SET lease_owner = NULL, lease_pid = NULL, "
                    "lease_host = NULL, lease_heartbeat = NULL WHERE id = ?",
                    (conversation_id,),
                )
                event = tx.emit(lambda v: LeaseChanged(conversation_id, v, None, None, token))
            return event  # type: ignore[return-value]
        except (LeaseLost, UnknownConversation):
            return None

    # --- reads ------------------------------------------------------------

    async def _fetchall(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        async with self._read_lock:
            try:
                cur = await self._reader.execute(sql, params)
                return list(await cur.fetchall())
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc

    async def get_conversation(self, conversation_id: str) -> Conversation:
        rows = await self._fetchall(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        )
        if not rows:
            raise UnknownConversation(
                f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
            )
        return _conversation(rows[0])

    async def lease(self, conversation_id: str) -> LeaseInfo:
        rows = await self._fetchall(
            "SELECT lease_owner, lease_pid, lease_host, lease_heartbeat, lease_token "
            "FROM conversations WHERE id = ?",
            (conversation_id,),
        )
        if not rows:
            raise UnknownConversation(f"no conversation {conversation_id}")
        return LeaseInfo(*rows[0])

    async def list_conversations(
        self, cwd: str | None = None, limit: int = 200
    ) -> list[Conversation]:
        where, params = ("WHERE cwd = ?", (cwd,)) if cwd is not None else ("", ())
        rows = await self._fetchall(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations {where} "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit),
        )
        return [_conversation(r) for r in rows]

    async def search_conversations(self, query: str, limit: int = 50) -> list[Conversation]:
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = await self._fetchall(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations c WHERE c.title LIKE ?1 ESCAPE '\\' "
            "OR EXISTS (SELECT 1 FROM entries e WHERE e.conversation_id = c.id "
            "AND e.text LIKE ?1 ESCAPE '\\') ORDER BY updated_at DESC LIMIT ?2",
            (pattern, limit),
        )
        return [_conversation(r) for r in rows]

    async def _read_snapshot(self, conversation_id: str) -> list[list[Any]]:
        db = self._reader
        await db.execute("BEGIN")
        try:
            results = []
            for sql in _SNAPSHOT_QUERIES:
                cur = await db.execute(sql, (conversation_id,))
                results.append(list(await cur.fetchall()))
            return results
        finally:
            await db.execute("COMMIT")

    async def snapshot(self, conversation_id: str) -> Snapshot:
        """Everything about one conversation, read in one read transaction."""
        async with self._read_lock:
            try:
                results = await self._read_snapshot(conversation_id)
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from exc
        if not results[0]:
            raise UnknownConversation(
                f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
            )
        return Snapshot(
            _conversation(results[0][0]),
            tuple(_entry(r) for r in results[1]),
            tuple(_run(r) for r in results[2]),
            tuple(_inbox(r) for r in results[3]),
            tuple(_tool_call(r) for r in results[4]),
        )

    async def ledger(
        self, conversation_id: str, after: int = 0, limit: int = 10_000
    ) -> list[DurableEvent]:
        rows = await self._fetchall(
            "SELECT type, payload, seq FROM ledger WHERE conversation_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (conversation_id, after, limit),
        )
        events: list[DurableEvent] = []
        for type_, payload, seq in rows:
            data = json.loads(payload)
            data.update(type=type_, conversation_id=conversation_id, version=seq)
            events.append(event_from_dict(data))  # type: ignore[arg-type]
        return events


_SNAPSHOT_QUERIES = (
    f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
    f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? ORDER BY position",
    f"SELECT {_RUN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY created_at, id",
    f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE conversation_id = ? ORDER BY created_at, id",
    f'SELECT {_TOOL_COLUMNS} FROM tool_calls WHERE conversation_id = ? ORDER BY created_at, "index"',
)

_LEDGER_INSERT = (
    "INSERT INTO ledger (conversation_id, seq, type, payload, time) VALUES (?, ?, ?, ?, ?)"
)


def _ledger_row(event: DurableEvent) -> tuple[Any, ...]:
    data = event_to_dict(event)
    for key in ("type", "conversation_id", "version"):
        data.pop(key)
    return (event.conversation_id, event.version, event.type, json.dumps(data), time.time())


class Tx:
    """A transaction in progress: buffered statements plus the events they make.

    Reads (`db.execute`) run immediately inside the transaction; writes are
    buffered and flushed in order on exit, with the ledger rows and the new
    conversation version, so a transaction costs a handful of awaits.
    """

    def __init__(self, db: aiosqlite.Connection, conversation_id: str, version: int) -> None:
        self.db = db
        self.conversation_id = conversation_id
        self.version = version
        self.events: list[DurableEvent] = []
        self._statements: list[tuple[str, tuple[Any, ...]]] = []

    async def conversation(self) -> Conversation:
        cur = await self.db.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
            (self.conversation_id,),
        )
        row = await cur.fetchone()
        if row is None:
            raise UnknownConversation(f"no conversation {self.conversation_id}")
        return _conversation(row)

    async def inbox_by_key(self, request_key: str) -> InboxItem | None:
        """The item admitted under `request_key`, read inside this transaction."""
        cur = await self.db.execute(
            f"SELECT {_INBOX_COLUMNS} FROM inbox WHERE conversation_id = ? AND request_key = ?",
            (self.conversation_id, request_key),
        )
        row = await cur.fetchone()
        return _inbox(row) if row else None

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        self._statements.append((sql, params))

    def emit(self, make: Callable[[int], DurableEvent]) -> DurableEvent:
        self.version += 1
        event = make(self.version)
        self.events.append(event)
        return event

    async def flush(self) -> None:
        for sql, params in self._statements:
            await self.db.execute(sql, params)
        if self.events:
            await self.db.execute(
                "UPDATE conversations SET version = ?, updated_at = ? WHERE id = ?",
                (self.version, time.time(), self.conversation_id),
            )
            await self.db.executemany(_LEDGER_INSERT, [_ledger_row(e) for e in self.events])

    # --- typed mutations: each one statement and one event ----------------

    def add_entry(self, entry: Entry) -> Entry:
        """Insert `entry`; its position becomes the version of its EntryAdded event."""
        placed = entry.but(position=self.version + 1)
        self.execute(
            f"INSERT INTO entries ({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                placed.id,
                placed.conversation_id,
                placed.position,
                placed.kind,
                placed.status,
                placed.text,
                placed.created_at,
                placed.run_id,
                json.dumps(placed.data),
            ),
        )
        self.emit(lambda v: EntryAdded(self.conversation_id, v, placed))
        return placed

    def append_text(self, entry_id: str, offset: int, text: str) -> None:
        self.execute("UPDATE entries SET text = text || ? WHERE id = ?", (text, entry_id))
        self.emit(lambda v: EntryTextAppended(self.conversation_id, v, entry_id, offset, text))

    def update_entry(self, entry: Entry) -> Entry:
        self.execute(
            "UPDATE entries SET status = ?, text = ?, data = ? WHERE id = ?",
            (entry.status, entry.text, json.dumps(entry.data), entry.id),
        )
        self.emit(lambda v: EntryUpdated(self.conversation_id, v, entry))
        return entry

    def put_run(self, run: Run) -> Run:
        self.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
            "updated_at = excluded.updated_at, revision = excluded.revision, "
            "reason = excluded.reason, error = excluded.error, usage = excluded.usage, "
            "result_entry_id = excluded.result_entry_id",
            (
                run.id,
                run.conversation_id,
                run.inbox_id,
                run.state,
                run.created_at,
                run.updated_at,
                run.revision,
                run.reason,
                json.dumps(run.error) if run.error else None,
                json.dumps(run.usage),
                run.result_entry_id,
            ),
        )
        self.emit(lambda v: RunUpdated(self.conversation_id, v, run))
        return run

    def put_inbox(self, item: InboxItem) -> InboxItem:
        self.execute(
            f"INSERT INTO inbox ({_INBOX_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET state = excluded.state, run_id = excluded.run_id, "
            "entry_id = excluded.entry_id",
            (
                item.id,
                item.conversation_id,
                item.mode,
                item.text,
                item.state,
                item.created_at,
                item.request_key,
                item.run_id,
                item.entry_id,
            ),
        )
        self.emit(lambda v: InboxUpdated(self.conversation_id, v, item))
        return item

    def put_tool_call(self, call: ToolCallRecord) -> ToolCallRecord:
        self.execute(
            f"INSERT INTO tool_calls ({_TOOL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET approval = excluded.approval, state = excluded.state, "
            "updated_at = excluded.updated_at, result = excluded.result, "
            "result_entry_id = excluded.result_entry_id",
            (
                call.id,
                call.conversation_id,
                call.run_id,
                call.entry_id,
                call.index,
                call.name,
                call.arguments,
                int(call.replay_safe),
                call.approval,
                call.state,
                call.created_at,
                call.updated_at,
                json.dumps(call.result) if call.result is not None else None,
                call.result_entry_id,
            ),
        )
        self.emit(lambda v: ToolCallUpdated(self.conversation_id, v, call))
        return call

    def update_conversation(self, conversation: Conversation) -> None:
        self.execute(
            "UPDATE conversations SET title = ?, settings = ? WHERE id = ?",
            (conversation.title, json.dumps(conversation.settings), conversation.id),
        )
        self.emit(
            lambda v: ConversationUpdated(self.conversation_id, v, conversation.but(version=v))
        )
