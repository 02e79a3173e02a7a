"""One write transaction: typed mutations, each a statement and a ledger event.

A `Tx` lives on the store's writer thread for the length of one `BEGIN
IMMEDIATE … COMMIT`. Its methods are synchronous: statements run at once, so a
state change is a compare-and-set decided by the row count (`UPDATE … WHERE
state = 'queued'`), never by a snapshot read earlier. A transition that loses
returns None; the caller tells its own caller why.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from runtime.model.errors import UnknownConversation, UnknownEntry
from runtime.model.events import (
    ConversationUpdated,
    DurableEvent,
    EntryAdded,
    EntryClosed,
    EntryReasoningAppended,
    EntryTextAppended,
    EntryUpdated,
    InboxUpdated,
    RulesUpdated,
    RunUpdated,
    ToolCallUpdated,
    ToolOutputAppended,
)
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    Conversation,
    Entry,
    InboxItem,
    InboxState,
    Run,
    RunState,
    ToolCallRecord,
)
from runtime.model.rules import Rule, Scope
from runtime.store import ledger, marks
from runtime.store.rows import (
    CONVERSATION_COLUMNS,
    ENTRY_COLUMNS,
    INBOX_COLUMNS,
    RUN_COLUMNS,
    conversation_row,
    entry_row,
    inbox_row,
    run_row,
)

if TYPE_CHECKING:
    from runtime.store.dialect import Db

__all__ = [
    "ENTRY_COLUMNS",
    "INBOX_COLUMNS",
    "RUN_COLUMNS",
    "TOOL_COLUMNS",
    "Tx",
    "entry_row",
    "inbox_row",
    "joined_chunks",
    "run_row",
    "session_rules",
    "tool_call_row",
]

TOOL_COLUMNS = (
    'id, conversation_id, run_id, entry_id, "index", name, arguments, replay_safe, approval,'
    " state, created_at, updated_at, result, result_entry_id, provider_id, process, review"
)
_ACTIVE = ", ".join(f"'{s.value}'" for s in ACTIVE_RUN_STATES)


def tool_call_row(row: Sequence[Any]) -> ToolCallRecord:
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
        provider_id=row[14],
        process=json.loads(row[15]) if row[15] else None,
        review=json.loads(row[16]) if row[16] else None,
    )


def _json_or_none(value: Any) -> str | None:
    return json.dumps(value, ensure_ascii=False) if value is not None else None


def session_rules(db: Db, conversation_id: str) -> tuple[Rule, ...]:
    rows = db.execute(
        "SELECT kind, pattern FROM approval_rules WHERE conversation_id = ? "
        "ORDER BY created_at, kind, pattern",
        (conversation_id,),
    ).fetchall()
    return tuple(Rule(kind, pattern, Scope.SESSION) for kind, pattern in rows)


def joined_chunks(db: Db, owner_id: str, kind: str) -> str:
    rows = db.execute(
        "SELECT text FROM chunks WHERE owner_id = ? AND kind = ? ORDER BY start",
        (owner_id, kind),
    ).fetchall()
    return "".join(r[0] for r in rows)


class Tx:
    """A transaction in progress on the writer thread. Not for use outside `Store.transact`."""

    def __init__(self, db: Db, conversation_id: str, version: int) -> None:
        self.db = db
        self.conversation_id = conversation_id
        self.version = version
        self.events: list[DurableEvent] = []

    # --- primitives -------------------------------------------------------

    def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Run one statement now; returns the number of rows it changed."""
        return self.db.execute(sql, tuple(params)).rowcount

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        return self.db.execute(sql, tuple(params)).fetchall()

    def emit(self, make: Callable[[int], DurableEvent]) -> DurableEvent:
        self.version += 1
        event = make(self.version)
        self.events.append(event)
        return event

    def finish(self) -> None:
        """Record the events in the ledger and advance the conversation's version."""
        if not self.events:
            return
        self.db.execute(
            "UPDATE conversations SET version = ?, updated_at = ? WHERE id = ?",
            (self.version, time.time(), self.conversation_id),
        )
        rows = [ledger.row(e) for e in self.events if e.type not in marks.TYPES]
        self.db.executemany(ledger.INSERT, rows)  # checkpoints are marks on their chunks

    # --- reads inside the transaction --------------------------------------

    def conversation(self) -> Conversation:
        rows = self.rows(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?",
            (self.conversation_id,),
        )
        if not rows:
            raise UnknownConversation(f"no conversation {self.conversation_id}")
        return conversation_row(rows[0])

    def run(self, run_id: str) -> Run | None:
        rows = self.rows(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ? AND conversation_id = ?",
            (run_id, self.conversation_id),
        )
        return run_row(rows[0]) if rows else None

    def active_run(self) -> Run | None:
        rows = self.rows(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id = ? AND state IN ({_ACTIVE}) "
            "ORDER BY created_at, id LIMIT 1",
            (self.conversation_id,),
        )
        return run_row(rows[0]) if rows else None

    def tool_call(self, call_id: str) -> ToolCallRecord | None:
        rows = self.rows(
            f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE id = ? AND conversation_id = ?",
            (call_id, self.conversation_id),
        )
        return tool_call_row(rows[0]) if rows else None

    def inbox_item(self, item_id: str, conversation_id: str | None = None) -> InboxItem | None:
        """This conversation's item `item_id` (or `conversation_id`'s: a request key is
        admitted once across conversations, so its item may be another's)."""
        rows = self.rows(
            f"SELECT {INBOX_COLUMNS} FROM inbox WHERE id = ? AND conversation_id = ?",
            (item_id, conversation_id or self.conversation_id),
        )
        return inbox_row(rows[0]) if rows else None

    def queued_inbox(self) -> list[InboxItem]:
        """Queued steers and follow-ups, oldest first."""
        rows = self.rows(
            f"SELECT {INBOX_COLUMNS} FROM inbox WHERE conversation_id = ? AND state = 'queued' "
            "ORDER BY created_at, id",
            (self.conversation_id,),
        )
        return [inbox_row(r) for r in rows]

    # --- entries ------------------------------------------------------------

    def context_changed_since(self, version: int) -> bool:
        """Whether an entry added after `version` changes what a summary planned then
        would stand for: another summary or a reset. (Settled entries never change, a
        rewind forks, and what the run adds meanwhile comes after what it summarises.)"""
        row = self.db.execute(
            "SELECT 1 FROM entries WHERE conversation_id = ? AND position > ?"
            " AND kind IN ('summary', 'reset') LIMIT 1",
            (self.conversation_id, version),
        ).fetchone()
        return row is not None

    def add_entry(self, entry: Entry) -> Entry:
        """Insert `entry`; its position becomes the version of its EntryAdded event."""
        placed = entry.but(position=self.version + 1)
        self.execute(
            f"INSERT INTO entries ({ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                placed.id,
                placed.conversation_id,
                placed.position,
                placed.kind,
                placed.status,
                placed.text,
                placed.created_at,
                placed.run_id,
                json.dumps(placed.data, ensure_ascii=False),
            ),
        )
        self.emit(lambda v: EntryAdded(self.conversation_id, v, placed))
        return placed

    def chunk_end(self, owner_id: str, kind: str) -> int:
        """Where the checkpointed chunks of `owner_id` end (one index seek)."""
        rows = self.rows(
            "SELECT start + length(text) FROM chunks WHERE owner_id = ? AND kind = ? "
            "AND conversation_id = ? ORDER BY start DESC LIMIT 1",
            (owner_id, kind, self.conversation_id),
        )
        return int(rows[0][0]) if rows else 0

    def append_chunk(self, owner_id: str, kind: str, offset: int, text: str) -> int:
        """Checkpoint streamed `text` that starts at `offset`: only what is not stored yet
        is written, as one small row whatever the entry's size, so a checkpoint
        repeated after a cancellation never duplicates text. Returns the new end."""
        end = self.chunk_end(owner_id, kind)
        if offset > end:
            raise ValueError(f"chunk of {owner_id} at {offset} leaves a hole after {end}")
        text = text[end - offset :]
        if not text:
            return end
        # A text or reasoning checkpoint's event is the chunk's mark (runtime.store.marks).
        seq, stamp = (self.version + 1, time.time()) if kind in marks.KINDS else (None, None)
        self.execute(
            "INSERT INTO chunks (conversation_id, owner_id, kind, start, text, seq, time) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self.conversation_id, owner_id, kind, end, text, seq, stamp),
        )
        cid = self.conversation_id
        if kind == "text":
            self.emit(lambda v: EntryTextAppended(cid, v, owner_id, end, text))
        elif kind == "reasoning":
            self.emit(lambda v: EntryReasoningAppended(cid, v, owner_id, end, text))
        else:
            self.emit(lambda v: ToolOutputAppended(cid, v, owner_id, end, text))
        return end + len(text)

    def close_entry(self, entry_id: str, status: str, data: dict[str, Any]) -> Entry | None:
        """End a streaming entry: its chunks join into its text (and reasoning), once.

        Compare-and-set on `status = 'streaming'`; None if it was already closed.
        """
        text = joined_chunks(self.db, entry_id, "text")
        reasoning = joined_chunks(self.db, entry_id, "reasoning")
        if reasoning:
            data = {**data, "reasoning": reasoning}
        changed = self.execute(
            "UPDATE entries SET status = ?, text = ?, data = ? "
            "WHERE id = ? AND conversation_id = ? AND status = 'streaming'",
            (status, text, json.dumps(data, ensure_ascii=False), entry_id, self.conversation_id),
        )
        if changed == 0:
            return None
        marks.seal(self.db, self.conversation_id, entry_id)
        self.execute(
            "DELETE FROM chunks WHERE owner_id = ? AND conversation_id = ? "
            "AND kind IN ('text', 'reasoning')",
            (entry_id, self.conversation_id),
        )
        cid = self.conversation_id
        self.emit(lambda v: EntryClosed(cid, v, entry_id, status, data, len(text)))
        rows = self.rows(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ? AND conversation_id = ?",
            (entry_id, self.conversation_id),
        )
        return entry_row(rows[0])

    def reset_entry(self, entry: Entry) -> Entry:
        """Start a streaming entry over (a retried request): its chunks are dropped (their
        checkpoints' marks sealed first: the events stay in the ledger)."""
        marks.seal(self.db, self.conversation_id, entry.id)
        self.execute(
            "DELETE FROM chunks WHERE owner_id = ? AND conversation_id = ?",
            (entry.id, self.conversation_id),
        )
        return self.update_entry(entry.but(text="", data={}))

    def update_entry(self, entry: Entry) -> Entry:
        changed = self.execute(
            "UPDATE entries SET status = ?, text = ?, data = ? WHERE id = ? AND conversation_id = ?",
            (
                entry.status,
                entry.text,
                json.dumps(entry.data, ensure_ascii=False),
                entry.id,
                self.conversation_id,
            ),
        )
        if changed == 0:
            raise UnknownEntry(f"no entry {entry.id} in conversation {self.conversation_id}")
        self.emit(lambda v: EntryUpdated(self.conversation_id, v, entry))
        return entry

    # --- runs ---------------------------------------------------------------

    def insert_run(self, run: Run) -> Run:
        self.execute(
            f"INSERT INTO runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                int(run.interrupt_requested),
            ),
        )
        self.emit(lambda v: RunUpdated(self.conversation_id, v, run))
        return run

    def transition_run(self, run_id: str, from_states: Sequence[str], **changes: Any) -> Run | None:
        """Move a run that is in one of `from_states`; None (nothing written) if it is not."""
        current = self.run(run_id)
        if current is None or current.state not in from_states:
            return None
        updated = current.but(updated_at=time.time(), revision=current.revision + 1, **changes)
        placeholders = ", ".join("?" for _ in from_states)
        changed = self.execute(
            "UPDATE runs SET state = ?, updated_at = ?, revision = ?, reason = ?, error = ?, "
            "usage = ?, result_entry_id = ?, interrupt_requested = ? "
            f"WHERE id = ? AND conversation_id = ? AND revision = ? AND state IN ({placeholders})",
            (
                updated.state,
                updated.updated_at,
                updated.revision,
                updated.reason,
                json.dumps(updated.error) if updated.error else None,
                json.dumps(updated.usage),
                updated.result_entry_id,
                int(updated.interrupt_requested),
                run_id,
                self.conversation_id,
                current.revision,
                *from_states,
            ),
        )
        if changed == 0:
            return None
        self.emit(lambda v: RunUpdated(self.conversation_id, v, updated))
        if updated.state == RunState.FAILED:
            self.hold_queued()
        return updated

    # --- inbox --------------------------------------------------------------

    def insert_inbox(self, item: InboxItem) -> InboxItem:
        self.execute(
            f"INSERT INTO inbox ({INBOX_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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

    def transition_inbox(
        self,
        item_id: str,
        to_state: str,
        *,
        run_id: str | None = None,
        entry_id: str | None = None,
        from_state: str = InboxState.QUEUED,
    ) -> InboxItem | None:
        """queued → placed, withdrawn or held (held → queued or withdrawn); None if the
        item is no longer in `from_state`."""
        changed = self.execute(
            "UPDATE inbox SET state = ?, run_id = ?, entry_id = ? "
            "WHERE id = ? AND conversation_id = ? AND state = ?",
            (to_state, run_id, entry_id, item_id, self.conversation_id, from_state),
        )
        if changed == 0:
            return None
        item = self.inbox_item(item_id)
        assert item is not None
        self.emit(lambda v: InboxUpdated(self.conversation_id, v, item))
        return item

    def hold_queued(self) -> list[InboxItem]:
        """Hold every queued item: a run failed, so what was queued behind it waits for
        the user instead of starting at once (issue 25, item 13)."""
        held = (self.transition_inbox(i.id, InboxState.HELD) for i in self.queued_inbox())
        return [item for item in held if item is not None]

    def held_inbox(self) -> list[InboxItem]:
        """Held items, oldest first."""
        rows = self.rows(
            f"SELECT {INBOX_COLUMNS} FROM inbox WHERE conversation_id = ? AND state = 'held' "
            "ORDER BY created_at, id",
            (self.conversation_id,),
        )
        return [inbox_row(r) for r in rows]

    def withdraw_queued(self) -> list[InboxItem]:
        """Withdraw every queued item of the conversation (an interrupt gives them back)."""
        out = []
        for item in self.queued_inbox():
            done = self.transition_inbox(item.id, InboxState.WITHDRAWN)
            if done is not None:
                out.append(done)
        return out

    # --- tool calls -----------------------------------------------------------

    def insert_tool_call(self, call: ToolCallRecord) -> ToolCallRecord:
        self.execute(
            f"INSERT INTO tool_calls ({TOOL_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                call.provider_id,
                json.dumps(call.process) if call.process is not None else None,
                _json_or_none(call.review),
            ),
        )
        self.emit(lambda v: ToolCallUpdated(self.conversation_id, v, call))
        return call

    def transition_tool_call(
        self,
        call_id: str,
        *,
        from_states: Sequence[str],
        from_approvals: Sequence[str] | None = None,
        **changes: Any,
    ) -> ToolCallRecord | None:
        """Change a call that is in one of `from_states` (and approvals); None if not."""
        current = self.tool_call(call_id)
        if current is None or current.state not in from_states:
            return None
        if from_approvals is not None and current.approval not in from_approvals:
            return None
        updated = current.but(updated_at=time.time(), **changes)
        changed = self.execute(
            "UPDATE tool_calls SET approval = ?, state = ?, updated_at = ?, result = ?, "
            "result_entry_id = ?, process = ?, review = ?, arguments = ? "
            "WHERE id = ? AND conversation_id = ? AND state = ? AND approval = ?",
            (
                updated.approval,
                updated.state,
                updated.updated_at,
                json.dumps(updated.result) if updated.result is not None else None,
                updated.result_entry_id,
                json.dumps(updated.process) if updated.process is not None else None,
                _json_or_none(updated.review),
                updated.arguments,  # a PreToolUse hook's rewrite (runtime.hooks.points)
                call_id,
                self.conversation_id,
                current.state,
                current.approval,
            ),
        )
        if changed == 0:
            return None
        self.emit(lambda v: ToolCallUpdated(self.conversation_id, v, updated))
        return updated

    def pending_approvals(self) -> list[ToolCallRecord]:
        """The conversation's calls waiting for an answer, oldest first."""
        rows = self.rows(
            f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE conversation_id = ? "
            "AND state = 'pending' AND approval = 'pending' ORDER BY created_at, \"index\"",
            (self.conversation_id,),
        )
        return [tool_call_row(r) for r in rows]

    # --- approval rules -------------------------------------------------------

    def session_rules(self) -> tuple[Rule, ...]:
        return session_rules(self.db, self.conversation_id)

    def add_session_rules(self, rules: Sequence[Rule]) -> tuple[Rule, ...]:
        """Save rules for this conversation (once each); emits the whole set if any is new."""
        added = 0
        for rule in rules:
            added += self.execute(
                "INSERT INTO approval_rules (conversation_id, kind, pattern, created_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (self.conversation_id, rule.kind, rule.pattern, time.time()),
            )
        current = self.session_rules()
        if added:
            listed = [r.to_dict() for r in current]
            self.emit(lambda v: RulesUpdated(self.conversation_id, v, listed))
        return current

    # --- the conversation -----------------------------------------------------

    def update_conversation(self, conversation: Conversation) -> None:
        if conversation.id != self.conversation_id:
            raise UnknownConversation(f"conversation {conversation.id} is not this transaction's")
        self.execute(
            "UPDATE conversations SET title = ?, settings = ? WHERE id = ?",
            (conversation.title, json.dumps(conversation.settings), conversation.id),
        )
        self.emit(
            lambda v: ConversationUpdated(self.conversation_id, v, conversation.but(version=v))
        )
