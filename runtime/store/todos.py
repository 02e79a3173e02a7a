"""The todo list as stored: a `todo` call's list becomes its conversation's, in the
transaction that settles the call, and a copy of a conversation (fork, rewind) takes
the list as it stood where the copy ends. The tool itself is runtime.plan's."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from runtime.model.events import TodosUpdated
from runtime.model.todo import TodoItem

if TYPE_CHECKING:
    from runtime.model.records import ToolCallRecord
    from runtime.model.tools import ToolOutcome
    from runtime.store.dialect import Db
    from runtime.store.tx import Tx

__all__ = ["TODO_TOOL", "copied_todos", "record_todos", "stored_todos"]

TODO_TOOL = "todo"


def record_todos(tx: Tx, call: ToolCallRecord, outcome: ToolOutcome) -> None:
    """In the transaction that settles a `todo` call: its list becomes the conversation's,
    and `todos.updated` tells the front ends. Nothing for any other call or a refusal."""
    if call.name != TODO_TOOL or not outcome.ok or "todos" not in outcome.data:
        return
    _store(tx, call, outcome.data["todos"])


def copied_todos(tx: Tx, call: ToolCallRecord) -> bool:
    """A copy of a conversation (fork, rewind) takes the list of its newest `todo` call
    that finished well: the plan as it stood at the copy's end. False if `call` has none."""
    result = call.result or {}
    if call.name != TODO_TOOL or call.state != "done" or not isinstance(result.get("todos"), list):
        return False
    _store(tx, call, result["todos"])
    return True


def stored_todos(db: Db, conversation_id: str) -> tuple[TodoItem, ...]:
    """The conversation's current list (empty if the model never kept one)."""
    row = db.execute(
        "SELECT items FROM todos WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        return ()
    return tuple(TodoItem.from_dict(d) for d in json.loads(row[0]))


def _store(tx: Tx, call: ToolCallRecord, todos: list[dict[str, Any]]) -> None:
    listed = [TodoItem.from_dict(d).to_dict() for d in todos]
    tx.execute(
        "INSERT INTO todos (conversation_id, items, tool_call_id, updated_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
        "items = excluded.items, tool_call_id = excluded.tool_call_id, "
        "updated_at = excluded.updated_at",
        (call.conversation_id, json.dumps(listed, ensure_ascii=False), call.id, time.time()),
    )
    tx.emit(lambda version: TodosUpdated(call.conversation_id, version, listed))
