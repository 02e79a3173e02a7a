"""Child conversations in the store: the link to their parent, found by the call.

A child is an ordinary conversation (its own entries, runs, inbox, tool calls
and lease) whose row names its parent (`task_parent_id`) and the parent's tool
call that started it (`task_call_id`, unique: one child per call, so a call run
again after a crash finds the child it started). The child's own settings keep
what it was started as (`settings["subagent"]`), so whoever drives it later
gives it the same tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.model.events import DurableEvent
from runtime.model.ids import uuid7
from runtime.model.records import Conversation, ToolCallRecord
from runtime.store.rows import CONVERSATION_COLUMNS, conversation_row
from runtime.store.tx import TOOL_COLUMNS, Tx, tool_call_row

if TYPE_CHECKING:
    from runtime.store.dialect import Db


__all__ = [
    "ChildLink",
    "call_owner",
    "children_of",
    "final_text",
    "find_child",
    "fork_children",
    "link_tx",
    "parent_of",
    "pending_child_calls",
    "subagent_of",
    "unfinished_children",
]

_UNFINISHED_RUN = (
    "EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = c.id AND r.state IN "
    "('queued', 'running', 'awaiting_approval'))"
)


class ChildLink(msgspec.Struct, frozen=True):
    conversation: Conversation
    call_id: str

    @property
    def agent(self) -> str:
        return str(subagent_of(self.conversation).get("agent", ""))


def subagent_of(conversation: Conversation) -> dict[str, Any]:
    """What a child was started as ({} for a conversation that is not a child)."""
    found = conversation.settings.get("subagent")
    return found if isinstance(found, dict) else {}


def link_tx(tx: Tx, parent_id: str, call_id: str) -> None:
    """In the transaction that creates the child: its link to the parent and the call."""
    tx.execute(
        "UPDATE conversations SET task_parent_id = ?, task_call_id = ? WHERE id = ?",
        (parent_id, call_id, tx.conversation_id),
    )


def find_child(db: Db, call_id: str) -> str | None:
    """The child the parent's call `call_id` started, if it started one."""
    row = db.execute("SELECT id FROM conversations WHERE task_call_id = ?", (call_id,)).fetchone()
    return None if row is None else str(row[0])


def parent_of(db: Db, conversation_id: str) -> str | None:
    row = db.execute(
        "SELECT task_parent_id FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def children_of(db: Db, parent_id: str) -> list[ChildLink]:
    """The parent's children, oldest first."""
    rows = db.execute(
        f"SELECT {CONVERSATION_COLUMNS}, task_call_id FROM conversations "
        "WHERE task_parent_id = ? ORDER BY created_at, id",
        (parent_id,),
    ).fetchall()
    return [ChildLink(conversation_row(r[:-1]), str(r[-1])) for r in rows]


def unfinished_children(db: Db, parent_id: str) -> list[str]:
    """Children of `parent_id` with a run not ended yet (to interrupt with the parent)."""
    rows = db.execute(
        f"SELECT c.id FROM conversations c WHERE c.task_parent_id = ? AND {_UNFINISHED_RUN} "
        "ORDER BY c.created_at",
        (parent_id,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def pending_child_calls(db: Db, parent_id: str) -> tuple[ToolCallRecord, ...]:
    """The calls of `parent_id`'s children waiting for the user's approval, oldest first."""
    rows = db.execute(
        f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE approval = 'pending' AND state = 'pending' "
        "AND conversation_id IN (SELECT id FROM conversations WHERE task_parent_id = ?) "
        'ORDER BY created_at, "index"',
        (parent_id,),
    ).fetchall()
    return tuple(tool_call_row(r) for r in rows)


def call_owner(db: Db, conversation_id: str, call_id: str) -> str:
    """The conversation whose call `call_id` is, when it is `conversation_id` or one of
    its children (an approval asked by a child is answered from the parent's screen);
    else `conversation_id`, for the caller's own check to refuse."""
    row = db.execute(
        "SELECT t.conversation_id, c.task_parent_id FROM tool_calls t "
        "JOIN conversations c ON c.id = t.conversation_id WHERE t.id = ?",
        (call_id,),
    ).fetchone()
    if row is not None and row[1] == conversation_id:
        return str(row[0])
    return conversation_id


def final_text(db: Db, run_id: str) -> str:
    """A child run's report: its answer after its last tool round. An answer a crash cut
    and the run then went on with (runtime.context.messages's CONTINUE) is both parts, joined:
    the partial is kept, and the continuation goes on from where it stops."""
    parts: list[str] = []
    for kind, status, text, data in db.execute(
        "SELECT kind, status, text, data FROM entries WHERE run_id = ? ORDER BY position",
        (run_id,),
    ):
        if kind != "assistant" or json.loads(data).get("tool_calls"):
            parts = []  # a tool round or a steer: the answer is what follows it
        elif status in ("complete", "interrupted") and text:
            parts.append(text)
    return "".join(parts)


def fork_children(
    tx: Tx,
    copied: dict[str, str],
    insert: Callable[[Conversation], tuple[Tx, DurableEvent]],
) -> list[DurableEvent]:
    """In a fork's transaction (`tx` writes the fork): a copy of the subagent of every
    task call the fork copied, whole, linked to the fork and to the copied call, whose
    `process` then names the copy. Returns the copies' events."""
    from runtime.store import sessions

    events: list[DurableEvent] = []
    for old_call, new_call in copied.items():
        child_id = find_child(tx.db, old_call)
        if child_id is None:
            continue
        probe = Tx(tx.db, child_id, 0)
        source, entries = sessions.read_source(probe, child_id)
        end = entries[-1].position if entries else 0
        history = sessions.history_until(probe, child_id, entries, end)
        started_as = {**subagent_of(source), "parent": tx.conversation_id, "call": new_call}
        copy = sessions.forked_conversation(source, uuid7(), end)
        copy = copy.but(settings={**copy.settings, "subagent": started_as}, version=1)
        child_tx, first = insert(copy)
        sessions.copy_history(child_tx, history, with_effects=True)
        link_tx(child_tx, tx.conversation_id, new_call)
        child_tx.finish()
        events += [first, *child_tx.events]
        rows = tx.rows(f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE id = ?", (old_call,))
        before = tool_call_row(rows[0]) if rows else None
        call = tx.tool_call(new_call)
        if before is not None and before.process is not None and call is not None:
            process = {**before.process, "child": copy.id}  # (a copy's is cleared)
            tx.transition_tool_call(new_call, from_states=(call.state,), process=process)
    return events
