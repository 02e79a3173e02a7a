"""Full-text search over every conversation's entries: the queries and how they are
answered are `runtime.store.ftsquery`'s; this module makes their rows `SearchHit`s."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from runtime.model.records import Conversation
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


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A conversation that matched, with its best-ranked entry and a snippet of it.

    `spans` is the snippet as (text, matched) pieces; `marked()` joins them with the
    marks a front end wants. `score` is bm25 (lower is better)."""

    conversation: Conversation
    entry_id: str
    entry_kind: str
    score: float
    spans: tuple[tuple[str, bool], ...]

    def marked(self, before: str = "[", after: str = "]") -> str:
        return "".join(f"{before}{t}{after}" if hit else t for t, hit in self.spans)


def _hit(
    row: tuple[Any, ...], entry_id: str, kind: str, score: float, spans: ftsquery.Spans
) -> SearchHit:
    return SearchHit(conversation_row(row), entry_id, kind, score, spans)


def search(db: sqlite3.Connection, query: str, limit: int = 50) -> list[SearchHit]:
    """Conversations whose entries match `query`, best first (one hit each)."""
    return ftsquery.search(db, query, _hit, limit)
