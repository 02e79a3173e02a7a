"""Full-text search on PostgreSQL: the `search` tsvector of entries (English stemming,
as SQLite's porter tokenizer; tool results left out, as there), ranked by ts_rank,
the snippet cut by ts_headline.

A query is read as web search syntax (`a phrase in quotes`, `a OR b`, `-word`);
when it matches nothing its words are tried as beginnings of words (walrus finds
walruses), as on SQLite. `score` is the rank negated, so lower is better on both
engines (SQLite's is bm25).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from runtime.model.results import SearchHit
from runtime.store.ftsquery import HIT_COLUMNS, SearchQueryError
from runtime.store.rows import conversation_row

if TYPE_CHECKING:
    from runtime.store.dialect import Db

__all__ = ["search"]

_OPEN, _CLOSE = "\x02", "\x03"
_OPTIONS = f"StartSel={_OPEN}, StopSel={_CLOSE}, MaxWords=16, MinWords=6, ShortWord=2"
_CANDIDATES = 5_000  # the newest matches ranked (as SQLite's RANKED)
_WORD = re.compile(r"[^\W_]+")

# The best entry of each conversation (a subagent's goes to its top-level session).
_FIND = (
    "WITH q AS (SELECT {query} AS q), "
    "matched AS (SELECT e.conversation_id, e.id, e.kind, e.text, ts_rank(e.search, q.q) AS rank "
    "FROM entries e, q WHERE e.search @@ q.q ORDER BY e.created_at DESC LIMIT ?) "
    "SELECT conversation_id, id, kind, rank, ts_headline('english', text, q.q, ?) "
    "FROM matched, q ORDER BY rank DESC, id DESC"
)
_TOP = (
    "WITH RECURSIVE up(id, parent, depth) AS ("
    "SELECT id, task_parent_id, 0 FROM conversations WHERE id = CAST(? AS TEXT) UNION ALL "
    "SELECT c.id, c.task_parent_id, up.depth + 1 FROM conversations c "
    "JOIN up ON c.id = up.parent WHERE up.depth < 16) "
    "SELECT id FROM up ORDER BY depth DESC LIMIT 1"
)


def search(db: Db, query: str, limit: int = 50) -> list[SearchHit]:
    """Conversations whose entries match `query`, best first (one hit each)."""
    if not query.strip():
        raise SearchQueryError("the search query is empty", hint="give a word to look for")
    hits = _find(db, "websearch_to_tsquery('english', ?)", query, limit)
    words = _WORD.findall(query)
    if not hits and words:  # nothing for the whole words: try them as beginnings
        prefix = " & ".join(f"{w}:*" for w in words)
        hits = _find(db, "to_tsquery('english', ?)", prefix, limit)
    return hits


def _find(db: Db, make_query: str, text: str, limit: int) -> list[SearchHit]:
    rows = db.execute(_FIND.format(query=make_query), (text, _CANDIDATES, _OPTIONS)).fetchall()
    hits: list[SearchHit] = []
    seen: set[str] = set()
    for conversation_id, entry_id, kind, rank, snippet in rows:
        top = db.execute(_TOP, (conversation_id,)).fetchone()
        shown = top[0] if top is not None else conversation_id
        if shown in seen:
            continue
        seen.add(shown)
        conv = db.execute(
            f"SELECT {HIT_COLUMNS} FROM conversations WHERE id = ?", (shown,)
        ).fetchone()
        if conv is None:
            continue
        hits.append(
            SearchHit(conversation_row(tuple(conv)), entry_id, kind, -float(rank), _spans(snippet))
        )
        if len(hits) >= limit:
            break
    return hits


def _spans(snippet: str) -> tuple[tuple[str, bool], ...]:
    spans: list[tuple[str, bool]] = []
    for i, part in enumerate(re.split(f"{_OPEN}|{_CLOSE}", snippet)):
        if part:
            spans.append((part, i % 2 == 1))
    return tuple(spans)
