"""Full-text search over every conversation's entries (SQLite FTS5, ranked by bm25).

The index (`entries_fts`, migration "full-text search of entries") holds the
closed text of user, assistant, summary and note entries; triggers keep it in
step inside the transactions that write entries. A query is tried as FTS5
syntax first (`foo*`, `"a phrase"`, `a OR b`); text that is not valid syntax
(`"unbalanced`, `a:b`) is searched again as plain words, each quoted; when
nothing matches, the words are tried as beginnings of words. Words are
stemmed (porter: "tests" finds "test") and accents are ignored.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from runtime.errors import BastionError
from runtime.records import Conversation
from runtime.tx import CONVERSATION_COLUMNS, conversation_row

_OPEN, _CLOSE = "\x02", "\x03"  # snippet marks, split into spans before anyone sees them
_WS = re.compile(r"\s+")
RANKED = 5_000  # a word in more entries is ranked among its newest RANKED matches


class SearchQueryError(BastionError):
    code = "bad_search"


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


def search(db: sqlite3.Connection, query: str, limit: int = 50) -> list[SearchHit]:
    """Conversations whose entries match `query`, best first (one hit each)."""
    if not query.strip():
        raise SearchQueryError("the search query is empty", hint="give a word to look for")
    try:
        hits = _search(db, query, limit)
    except sqlite3.OperationalError:
        # Not FTS5 syntax (`"unbalanced`, `a:b`, `NEAR(`): search the words instead. A
        # real database problem fails again below and is raised from there.
        hits = None
    words = [w.replace('"', '""') for w in query.split()]
    if hits is None:
        hits = _search(db, " ".join(f'"{w}"' for w in words), limit)
    if not hits:  # nothing for the whole words: try them as beginnings (walrus → walruses)
        hits = _search(db, " ".join(f'"{w}"*' for w in words), limit)
    return hits


def _search(db: sqlite3.Connection, match: str, limit: int) -> list[SearchHit]:
    # bm25 costs time in proportion to the matches: a word in most entries is ranked
    # among its newest RANKED matches (rowids grow as entries are written), so a
    # query stays fast however large the store grows.
    floor = db.execute(
        "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rowid DESC "
        "LIMIT 1 OFFSET ?",
        (match, RANKED - 1),
    ).fetchone()
    best = db.execute(
        "SELECT conversation_id, rowid, id, kind, min(score) AS best FROM ("
        "SELECT f.rowid AS rowid, f.rank AS score, e.conversation_id AS conversation_id, "
        "e.id AS id, e.kind AS kind FROM entries_fts f JOIN entries e ON e.rowid = f.rowid "
        "WHERE entries_fts MATCH ? AND f.rowid >= ?"
        ") GROUP BY conversation_id ORDER BY best LIMIT ?",
        (match, floor[0] if floor else 0, limit),
    ).fetchall()
    hits = []
    for conversation_id, rowid, entry_id, kind, score in best:
        conv = db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        snippet = db.execute(
            "SELECT snippet(entries_fts, 0, ?, ?, '…', 16) FROM entries_fts "
            "WHERE entries_fts MATCH ? AND rowid = ?",
            (_OPEN, _CLOSE, match, rowid),
        ).fetchone()
        if conv is None or snippet is None:
            continue
        hits.append(
            SearchHit(conversation_row(conv), entry_id, kind, float(score), _spans(snippet[0]))
        )
    return hits


def _spans(snippet: str) -> tuple[tuple[str, bool], ...]:
    """The snippet as (text, matched) pieces, with line breaks and runs of spaces as one space."""
    spans: list[tuple[str, bool]] = []
    for i, part in enumerate(snippet.split(_OPEN)):
        matched, _, rest = part.partition(_CLOSE) if i else ("", "", part)
        if matched:
            spans.append((_WS.sub(" ", matched), True))
        rest = _WS.sub(" ", rest)
        if rest:
            spans.append((rest.lstrip() if not spans else rest, False))
    return tuple(s for s in spans if s[0])
