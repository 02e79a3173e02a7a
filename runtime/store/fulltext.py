"""Full-text search over every conversation's entries: the queries and how they are
answered are `runtime.store.ftsquery`'s; this module makes their rows `SearchHit`s."""

from __future__ import annotations

import sqlite3
from typing import Any

from runtime.model.results import SearchHit
from runtime.store import ftsquery
from runtime.store.ftsquery import (
    PHRASE_RANKED,
    RANKED,
    TOKENIZE,
    SearchQueryError,
    _without_positions,
)
from runtime.store.rows import conversation_row

__all__ = [
    "PHRASE_RANKED",
    "RANKED",
    "TOKENIZE",
    "SearchHit",
    "SearchQueryError",
    "_without_positions",
    "search",
]

# The queries live in runtime.store.ftsquery (no dataclasses, no records: the read-only
# store uses them without loading either); this module makes their rows SearchHits.


def _hit(
    row: tuple[Any, ...], entry_id: str, kind: str, score: float, spans: ftsquery.Spans
) -> SearchHit:
    return SearchHit(conversation_row(row), entry_id, kind, score, spans)


def search(db: sqlite3.Connection, query: str, limit: int = 50) -> list[SearchHit]:
    """Conversations whose entries match `query`, best first (one hit each)."""
    return ftsquery.search(db, query, _hit, limit)
