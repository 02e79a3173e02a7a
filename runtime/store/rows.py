"""Stored rows as records: the one decoder of each the store, the ledger, the full-text
search, short ids and the read-only queries (`runtime.store.readonly`) share. Light on
purpose (records only), so a plain SELECT does not load the transactions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runtime.model.records import Conversation, Entry, InboxItem, Run

__all__ = [
    "CONVERSATION_COLUMNS",
    "ENTRY_COLUMNS",
    "INBOX_COLUMNS",
    "RUN_COLUMNS",
    "conversation_row",
    "entry_row",
    "inbox_row",
    "run_row",
]

CONVERSATION_COLUMNS = (
    "id, title, cwd, settings, created_at, updated_at, parent_id, fork_seq, version"
)


def conversation_row(row: Sequence[Any]) -> Conversation:
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


ENTRY_COLUMNS = "id, conversation_id, position, kind, status, text, created_at, run_id, data"
RUN_COLUMNS = (
    "id, conversation_id, inbox_id, state, created_at, updated_at, revision, reason, error,"
    " usage, result_entry_id, interrupt_requested"
)
INBOX_COLUMNS = "id, conversation_id, mode, text, state, created_at, request_key, run_id, entry_id"


def entry_row(row: Sequence[Any]) -> Entry:
    # (Positional, in Entry's field order, and `{}` without the JSON decoder: a run
    # reads every entry of its conversation, 5,000 of them in a long session.)
    data = row[8]
    return Entry(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
        {} if data == "{}" else json.loads(data),
    )  # fmt: skip


def run_row(row: Sequence[Any]) -> Run:
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
        interrupt_requested=bool(row[11]),
    )


def inbox_row(row: Sequence[Any]) -> InboxItem:
    return InboxItem(*row)
