"""Forks: a new conversation sharing another's history up to an entry.

A fork copies rows (entries, the runs they belong to, their tool calls) under
fresh ids, inside the one transaction that creates the new conversation, and
appends the same ledger events a live conversation would have (entry.added,
run.updated, tool_call.updated), so a follower replaying the fork's ledger
sees what a snapshot shows. The source is only read.

`copy_history` is shared with `bastion import`, which builds a conversation
from an exported file the same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.model.errors import UnknownConversation, UnknownEntry
from runtime.model.ids import uuid7
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    Conversation,
    Entry,
    EntryKind,
    EntryStatus,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.store.rows import CONVERSATION_COLUMNS, conversation_row
from runtime.store.todos import TODO_TOOL, copied_todos
from runtime.store.tx import (
    ENTRY_COLUMNS,
    RUN_COLUMNS,
    TOOL_COLUMNS,
    Tx,
    entry_row,
    run_row,
    tool_call_row,
)

if TYPE_CHECKING:
    from runtime.store.dialect import Db

_SETTLED = (ToolCallState.DONE, ToolCallState.DENIED, ToolCallState.INTERRUPTED)


class History(msgspec.Struct, frozen=True):
    """Rows of one conversation to copy: entries in order, their runs and tool calls."""

    entries: tuple[Entry, ...]
    runs: tuple[Run, ...]
    tool_calls: tuple[ToolCallRecord, ...]


class ForkPoint(msgspec.Struct, frozen=True):
    """Where a fork ends in its source: entries at or before `position` are shared."""

    source: Conversation
    position: int
    entry: Entry | None  # the last shared entry (None: nothing is shared)


def read_source(tx: Tx, source_id: str) -> tuple[Conversation, list[Entry]]:
    rows = tx.rows(f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (source_id,))
    if not rows:
        raise UnknownConversation(
            f"no conversation {source_id}", hint="list them with `bastion sessions --all`"
        )
    entries = tx.rows(
        f"SELECT {ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? ORDER BY position",
        (source_id,),
    )
    return conversation_row(rows[0]), [entry_row(r) for r in entries]


def find_entry(entries: Sequence[Entry], entry_id: str, conversation_id: str) -> Entry:
    for entry in entries:
        if entry.id == entry_id:
            return entry
    raise UnknownEntry(
        f"conversation {conversation_id} has no entry {entry_id}",
        hint=f"list its entries with `bastion export {conversation_id}`",
    )


def history_until(tx: Tx, source_id: str, entries: Sequence[Entry], position: int) -> History:
    """The closed entries at or before `position`, with their runs and tool calls."""
    kept = tuple(e for e in entries if e.position <= position and e.status != EntryStatus.STREAMING)
    entry_ids = {e.id for e in kept}
    run_ids = {e.run_id for e in kept if e.run_id}
    runs = tuple(
        run_row(r)
        for r in tx.rows(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE conversation_id = ? ORDER BY created_at, id",
            (source_id,),
        )
        if r[0] in run_ids
    )
    calls = tuple(
        tool_call_row(r)
        for r in tx.rows(
            f'SELECT {TOOL_COLUMNS} FROM tool_calls WHERE conversation_id = ? ORDER BY "index"',
            (source_id,),
        )
        if r[3] in entry_ids
    )
    return History(kept, runs, calls)


def copy_history(tx: Tx, history: History, *, with_effects: bool = False) -> dict[str, str]:
    """Insert `history` into `tx`'s conversation under fresh ids, in entry order, each
    row with its ledger event. A run cut short by the copy (one of its entries left
    out, or still active) ends interrupted; a call whose result was left out ends
    interrupted with no result. `with_effects` (a fork: same files) copies what each
    call recorded it would change, so a rewind in the copy can restore it too.
    Returns the map of old ids to new ones."""
    old_ids = [r.id for r in history.entries] + [r.id for r in history.runs]
    new = {old: uuid7() for old in old_ids + [c.id for c in history.tool_calls]}
    included = {e.id for e in history.entries}
    last_of_run: dict[str, int] = {}
    for e in history.entries:
        if e.run_id:
            last_of_run[e.run_id] = e.position
    runs = {r.id: r for r in history.runs}
    calls_of: dict[str, list[ToolCallRecord]] = {}
    for call in history.tool_calls:
        calls_of.setdefault(call.entry_id, []).append(call)
    placed: set[str] = set()
    plan: ToolCallRecord | None = None  # the newest todo call copied (runtime.plan)
    for entry in history.entries:
        run = runs.get(entry.run_id or "")
        if run is not None and run.id not in placed:
            placed.add(run.id)
            tx.insert_run(_copied_run(run, tx.conversation_id, new, included))
        tx.add_entry(_copied_entry(entry, tx.conversation_id, new))
        for call in calls_of.get(entry.id, ()):
            copied = _copied_call(call, tx.conversation_id, new, included)
            tx.insert_tool_call(copied)
            plan = copied if copied.name == TODO_TOOL and copied.state == "done" else plan
            if with_effects:
                tx.execute(
                    "INSERT INTO call_effects (tool_call_id, conversation_id, kind, path, "
                    "content, content_sha256, detail, created_at) SELECT ?, ?, kind, path, "
                    "content, content_sha256, detail, created_at FROM call_effects "
                    "WHERE tool_call_id = ?",  # the kept bytes are shared, not copied
                    (new[call.id], tx.conversation_id, call.id),
                )
    if plan is not None:
        copied_todos(tx, plan)  # the plan as it stood where the copy ends
    return new


def _copied_entry(entry: Entry, conversation_id: str, new: dict[str, str]) -> Entry:
    data: dict[str, Any] = dict(entry.data)
    if entry.kind == EntryKind.ASSISTANT and data.get("tool_calls"):
        data["tool_calls"] = [
            {**c, "key": new.get(c.get("key") or c.get("id", ""), c.get("key"))}
            for c in data["tool_calls"]
        ]
    if entry.kind == EntryKind.TOOL_RESULT and data.get("tool_call_id") in new:
        data["tool_call_id"] = new[data["tool_call_id"]]
    return entry.but(
        id=new[entry.id],
        conversation_id=conversation_id,
        run_id=new.get(entry.run_id or "", entry.run_id),
        data=data,
    )


def _copied_run(run: Run, conversation_id: str, new: dict[str, str], included: set[str]) -> Run:
    copied = run.but(
        id=new[run.id],
        conversation_id=conversation_id,
        result_entry_id=new.get(run.result_entry_id or ""),
        interrupt_requested=False,
    )
    cut = run.result_entry_id is not None and run.result_entry_id not in included
    if run.state in ACTIVE_RUN_STATES or cut:
        return copied.but(
            state=RunState.INTERRUPTED,
            reason="the copy ends inside this run",
            updated_at=time.time(),
        )
    return copied


def _copied_call(
    call: ToolCallRecord, conversation_id: str, new: dict[str, str], included: set[str]
) -> ToolCallRecord:
    copied = call.but(
        id=new[call.id],
        conversation_id=conversation_id,
        run_id=new.get(call.run_id, call.run_id),
        entry_id=new[call.entry_id],
        result_entry_id=new.get(call.result_entry_id or ""),
        process=None,
    )
    if call.state in _SETTLED and call.result_entry_id in included:
        return copied
    return copied.but(state=ToolCallState.INTERRUPTED, result=None, result_entry_id=None)


def forked_conversation(source: Conversation, new_id: str, position: int) -> Conversation:
    stamp = time.time()
    return Conversation(
        new_id,
        source.title,
        source.cwd,
        dict(source.settings),
        stamp,
        stamp,
        parent_id=source.id,
        fork_seq=position,
    )


def fork_position(entries: Sequence[Entry], at_entry: str | None, conversation_id: str) -> int:
    """The last shared position of a fork at `at_entry` (None: the whole history)."""
    if at_entry is None:
        return max((e.position for e in entries), default=0)
    entry = find_entry(entries, at_entry, conversation_id)
    if entry.status == EntryStatus.STREAMING:
        raise UnknownEntry(
            f"entry {at_entry} is still being streamed",
            hint="fork at an earlier entry, or wait until the answer ends",
        )
    return entry.position


def rewind_position(entries: Sequence[Entry], entry_id: str, conversation_id: str) -> Entry:
    """The user entry a rewind goes back to (its history ends just before it)."""
    entry = find_entry(entries, entry_id, conversation_id)
    if entry.kind != EntryKind.USER:
        raise UnknownEntry(
            f"entry {entry_id} is a {entry.kind} entry, not a message of yours",
            hint="rewind to one of your own messages",
        )
    return entry


def descendants(db: Db, conversation_id: str) -> list[str]:
    """Every conversation below `conversation_id` (children, theirs, …), oldest first."""
    rows = db.execute(
        "WITH RECURSIVE below(id, created_at) AS ("
        " SELECT id, created_at FROM conversations WHERE task_parent_id = ?"
        " UNION SELECT c.id, c.created_at FROM conversations c JOIN below b"
        " ON c.task_parent_id = b.id)"
        " SELECT id FROM below ORDER BY created_at, id",
        (conversation_id,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def session_cost(db: Db, conversation_id: str) -> tuple[float | None, int]:
    """What the whole session `conversation_id` belongs to has cost: every run of its
    top conversation and of every subagent below it (dollars, None when no part had
    a known price; tokens in and out)."""
    rows = db.execute(
        "WITH RECURSIVE up(id, parent, depth) AS ("
        " SELECT id, task_parent_id, 0 FROM conversations WHERE id = ?"
        " UNION ALL SELECT c.id, c.task_parent_id, up.depth + 1 FROM conversations c"
        " JOIN up ON c.id = up.parent WHERE up.depth < 64),"
        " top(id) AS (SELECT id FROM up WHERE parent IS NULL),"
        " below(id) AS (SELECT id FROM top"
        " UNION SELECT c.id FROM conversations c JOIN below b ON c.task_parent_id = b.id)"
        " SELECT r.usage FROM runs r JOIN below b ON r.conversation_id = b.id",
        (conversation_id,),
    ).fetchall()
    return _spent(rows)


def _spent(rows: list[Any]) -> tuple[float | None, int]:
    """Dollars (None: no row had a known price) and tokens of runs' `usage` rows."""
    cost: float | None = None
    tokens = 0
    for (raw,) in rows:
        usage = json.loads(raw or "{}")
        tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        if isinstance(usage.get("cost"), int | float):
            cost = (cost or 0.0) + float(usage["cost"])
    return cost, tokens


def children_cost(db: Db, run_id: str) -> tuple[float | None, int]:
    """What the children started by `run_id`'s calls (and theirs) cost: (dollars, None
    when no part had a known price; tokens in and out)."""
    rows = db.execute(
        "WITH RECURSIVE below(id) AS ("
        " SELECT c.id FROM conversations c JOIN tool_calls t ON t.id = c.task_call_id"
        " WHERE t.run_id = ?"
        " UNION SELECT c.id FROM conversations c JOIN below b ON c.task_parent_id = b.id)"
        " SELECT r.usage FROM runs r JOIN below b ON r.conversation_id = b.id",
        (run_id,),
    ).fetchall()
    return _spent(rows)
