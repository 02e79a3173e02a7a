"""Ledger rows: each durable event stored with what changed, each text stored once.

An event's payload leaves out what the tables already hold and never change:
the text of an added entry, of an inbox item, a tool call's arguments, a
closed entry's data (its tool calls, its reasoning). Nested records lose the
conversation id (the row has it) and every field still at its default. A
checkpoint of streamed text or reasoning is no row here at all: it is kept as a
mark on its chunk, sealed when its entry closes (runtime.store.marks); stores
from before schema 10 keep such rows, with the text's length in place of the text.
Reading the ledger back puts all of it back from the tables and merges the
marks in, so an event read back equals the event published: a follower (`bastion
attach`) and the reducer see the same thing either way.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.model.events import DurableEvent, event_from_dict, event_to_dict
from runtime.model.records import Conversation, Entry, InboxItem, Run, RunState, ToolCallRecord
from runtime.store import marks
from runtime.store.rows import (
    ENTRY_COLUMNS,
    INBOX_COLUMNS,
    RUN_COLUMNS,
    entry_row,
    inbox_row,
    run_row,
)

if TYPE_CHECKING:
    from runtime.store.dialect import Db

INSERT = "INSERT INTO ledger (conversation_id, seq, type, payload, time) VALUES (?, ?, ?, ?, ?)"
_RECORDS = {
    "conversation": Conversation,
    "entry": Entry,
    "run": Run,
    "item": InboxItem,
    "tool_call": ToolCallRecord,
}
_APPENDED = ("entry.text_appended", "entry.reasoning_appended")
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _defaults(cls: type[Any]) -> dict[str, Any]:
    out = {}
    for f in msgspec.structs.fields(cls):
        if f.default is not msgspec.NODEFAULT:
            out[f.name] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            out[f.name] = f.default_factory()
    return out


_DEFAULTS = {name: _defaults(cls) for name, cls in _RECORDS.items()}
# Fields the tables keep unchanged for good: left out of the payload, read back from there.
_AT_REST = {
    "entry": ("text",),
    "item": ("text", "created_at"),
    "tool_call": ("arguments",),
    "run": ("inbox_id", "created_at"),
}


def row(event: DurableEvent) -> tuple[Any, ...]:
    data = event_to_dict(event)
    for key in ("type", "conversation_id", "version"):
        data.pop(key)
    if event.type in _APPENDED:  # the commonest row: [entry id, offset, length]
        payload = _dumps([data["entry_id"], data["offset"], len(data["text"])])
        return (event.conversation_id, event.version, event.type, payload, time.time())
    if event.type == "entry.closed" and data["data"]:
        data["data"] = "@rest"  # a closed entry's data never changes again
    for name, defaults in _DEFAULTS.items():
        record = data.get(name)
        if not isinstance(record, dict):
            continue
        if event.type != "entry.updated" and _settled(name, record):
            data[name] = {"id": record["id"], "@rest": "*"}
            continue
        record.pop("conversation_id", None)
        slim = {k: v for k, v in record.items() if k not in defaults or defaults[k] != v}
        if slim.get("text") == "":
            slim.pop("text")  # an entry that starts empty (read back as "")
        if event.type != "entry.updated":
            rest = [f for f in _AT_REST.get(name, ()) if slim.get(f)]
            for f in rest:
                slim.pop(f)
            if rest:
                slim["@rest"] = rest
        data[name] = slim
    return (event.conversation_id, event.version, event.type, _dumps(data), time.time())


def read(
    db: Db, conversation_id: str, after: int, limit: int, before: int = marks.NO_BOUND
) -> list[DurableEvent]:
    """Events of `conversation_id` after version `after` and before `before` (at most
    `limit`), whole again: the ledger's rows merged with the checkpoints kept as marks
    (runtime.store.marks)."""
    rows = db.execute(
        "SELECT type, payload, seq FROM ledger WHERE conversation_id = ? AND seq > ? "
        "AND seq < ? ORDER BY seq LIMIT ?",
        (conversation_id, after, before, limit),
    ).fetchall()
    # Every checkpoint up to the last row read belongs in this batch (none beyond it
    # when the rows were cut at `limit`); the batch is the first `limit` of them all.
    upto = rows[-1][2] if len(rows) == limit else before - 1
    events = [_event(db, conversation_id, *r) for r in rows]
    checkpoints = marks.read(db, conversation_id, after, upto)
    if checkpoints:
        events = sorted([*events, *checkpoints], key=lambda e: e.version)[:limit]
    return events


def first_row(db: Db, conversation_id: str, after: int) -> int | None:
    """The version of the ledger's first row after `after` (None: no row)."""
    found = db.execute(
        "SELECT MIN(seq) FROM ledger WHERE conversation_id = ? AND seq > ?",
        (conversation_id, after),
    ).fetchone()
    return int(found[0]) if found and found[0] is not None else None


def _event(db: Db, conversation_id: str, type_: str, payload: str, seq: int) -> DurableEvent:
    """One ledger row read back."""
    data = json.loads(payload)
    if isinstance(data, list):
        data = {"entry_id": data[0], "offset": data[1], "length": data[2]}
    for name in _RECORDS:
        record = data.get(name)
        if isinstance(record, dict):
            record.setdefault("conversation_id", conversation_id)
            if name == "entry":
                record.setdefault("text", "")
            _restore(db, name, record)
    if type_ in _APPENDED and "text" not in data:
        data["text"] = _appended(db, type_, data)
    elif data.get("data") == "@rest":
        found = db.execute("SELECT data FROM entries WHERE id = ?", (data["entry_id"],))
        stored = found.fetchone()
        data["data"] = json.loads(stored[0]) if stored else {}
    data.update(type=type_, conversation_id=conversation_id, version=seq)
    return event_from_dict(data)  # type: ignore[return-value]


_TABLES = {"entry": "entries", "item": "inbox", "tool_call": "tool_calls", "run": "runs"}


#: Records in a state they never leave: a finished run, a placed or withdrawn inbox item,
#: an entry no longer streaming. Every later change to such a row is refused by the
#: triggers of migration 10, so an event's record in that state is the row itself,
#: kept whole by its table: the payload names it (`"@rest": "*"`).
_SETTLED = {
    "run": (RUN_COLUMNS, run_row),
    "item": (INBOX_COLUMNS, inbox_row),
    "entry": (ENTRY_COLUMNS, entry_row),
}


def _settled(name: str, record: dict[str, Any]) -> bool:
    if name == "run":
        return RunState(record["state"]).terminal
    if name == "item":
        return record["state"] in ("placed", "withdrawn")
    return name == "entry" and record["status"] != "streaming"


def _restore(db: Db, name: str, record: dict[str, Any]) -> None:
    rest = record.pop("@rest", None)
    if not rest:
        return
    if rest == "*":
        columns, decode = _SETTLED[name]
        found = db.execute(
            f"SELECT {columns} FROM {_TABLES[name]} WHERE id = ?", (record["id"],)
        ).fetchone()
        if found is None:
            raise LookupError(f"the ledger names {name} {record['id']}, which is not stored")
        record.update(decode(found).to_dict())
        return
    if isinstance(rest, str):
        rest = [rest]
    allowed = [f for f in rest if f in _AT_REST[name]]  # column names come from this module
    found = db.execute(
        f"SELECT {', '.join(allowed)} FROM {_TABLES[name]} WHERE id = ?", (record["id"],)
    ).fetchone()
    for i, f in enumerate(allowed):
        record[f] = found[i] if found else ("" if f in ("text", "arguments") else None)


def _appended(db: Db, type_: str, data: dict[str, Any]) -> str:
    """The text a checkpoint appended: from the chunks while the entry streams, else
    from the entry it was joined into."""
    kind = "text" if type_ == "entry.text_appended" else "reasoning"
    start, length = int(data["offset"]), int(data.pop("length"))
    found = db.execute(
        "SELECT text FROM chunks WHERE owner_id = ? AND kind = ? AND start = ?",
        (data["entry_id"], kind, start),
    ).fetchone()
    if found is not None:
        return str(found[0])[:length]
    entry = db.execute(
        "SELECT text, data FROM entries WHERE id = ?", (data["entry_id"],)
    ).fetchone()
    if entry is None:
        return ""
    whole = entry[0] if kind == "text" else json.loads(entry[1]).get("reasoning", "")
    return str(whole)[start : start + length]
