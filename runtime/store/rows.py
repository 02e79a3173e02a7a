"""A stored conversation row as a record: the one decoder the store, the full-text
search, short ids and the read-only queries (`runtime.store.readonly`) share. Light on
purpose (records only), so a plain SELECT does not load the transactions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from runtime.records import Conversation

__all__ = ["CONVERSATION_COLUMNS", "conversation_row"]

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
