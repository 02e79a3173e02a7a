"""Full-text search over every conversation's entries (SQLite FTS5, ranked by bm25):
the queries. `runtime.store.fulltext` makes their rows `SearchHit`s; `runtime.store.readonly`
makes light rows of them, so this module imports neither dataclasses nor records.

The index (`entries_fts`, migration "full-text search of entries") holds the
closed text of user, assistant, summary and note entries; triggers keep it in
step inside the transactions that write entries. A query is tried as FTS5
syntax first (`foo*`, `"a phrase"`, `a OR b`); text that is not valid syntax
(`"unbalanced`, `a:b`) is searched again as plain words, each quoted; when
nothing matches, the words are tried as beginnings of words. Words are
stemmed (porter: "tests" finds "test") and accents are ignored.

The index keeps which entries hold a word, not where (`detail=column`: positions
were most of its size). A query that needs positions (a phrase of two or more
words, NEAR) is answered in two steps: the index finds the entries that hold all
its words (the newest PHRASE_RANKED of them), and those entries are indexed again
with positions in memory, where the query itself is run, ranked and cut into
snippets. So a phrase of words that are each in most entries finds only the newest
of its matches; one with a rarer word finds them all.
"""

from __future__ import annotations

import sqlite3

from runtime.model.errors import BastionError

# (`bastion sessions search` loads this module: it leaves out typing and re, ~8 ms
# of imports, until a query needs re.)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    #: Each hit: (conversation row, entry id, entry kind, bm25 score, snippet spans).
    H = TypeVar("H")
    MakeHit = Callable[[tuple[Any, ...], str, str, float, "Spans"], H]
Spans = tuple[tuple[str, bool], ...]
#: The conversation columns a hit's row carries: `runtime.store.rows.CONVERSATION_COLUMNS`,
#: spelled out so that this module does not load the records (a test holds them equal).
HIT_COLUMNS = "id, title, cwd, settings, created_at, updated_at, parent_id, fork_seq, version"

_OPEN, _CLOSE = "\x02", "\x03"  # snippet marks, split into spans before anyone sees them
RANKED = 5_000  # a word in more entries is ranked among its newest RANKED matches
# A phrase (or NEAR) is looked for among the newest PHRASE_RANKED entries holding all its
# words: each is indexed again with positions (about 60 µs), so this bounds the time.
PHRASE_RANKED = 1_000
TOKENIZE = "porter unicode61 remove_diacritics 2"  # the index's (migration 5)
_NEEDS_POSITIONS = ("phrase queries are not supported", "NEAR queries are not supported")
# A query's strings (quoted, or bare words outside quotes) and the characters between.
_QUERY_PART = r'"(?:[^"]|"")*"|[^\s"()*^:+,{}-]+|\S'
_WORD = r"[^\W_]+"  # unicode61's tokens: runs of letters and digits


class SearchQueryError(BastionError):
    code = "bad_search"


def search(db: sqlite3.Connection, query: str, make: MakeHit[H], limit: int = 50) -> list[H]:
    """Conversations whose entries match `query`, best first (one hit each, made by
    `make`)."""
    if not query.strip():
        raise SearchQueryError("the search query is empty", hint="give a word to look for")
    try:
        hits = _find(db, query, make, limit)
    except sqlite3.OperationalError:
        # Not FTS5 syntax (`"unbalanced`, `a:b`, `NEAR(`): search the words instead. A
        # real database problem fails again below and is raised from there.
        hits = None
    words = [w.replace('"', '""') for w in query.split()]
    if hits is None:
        hits = _find(db, " ".join(f'"{w}"' for w in words), make, limit)
    if not hits:  # nothing for the whole words: try them as beginnings (walrus → walruses)
        hits = _find(db, " ".join(f'"{w}"*' for w in words), make, limit)
    return hits


def _find(db: sqlite3.Connection, match: str, make: MakeHit[H], limit: int) -> list[H]:
    """`match` run on the index, or, when it needs word positions, on the entries that
    hold its words, indexed again with positions (`_search_positions`)."""
    try:
        return _search(db, match, make, limit)
    except sqlite3.OperationalError as exc:
        if not any(why in str(exc) for why in _NEEDS_POSITIONS):
            raise
    return _search_positions(db, match, make, limit)


def _search(db: sqlite3.Connection, match: str, make: MakeHit[H], limit: int) -> list[H]:
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
    return _hits(db, db, match, best, make)


#: The top-level conversation above a subagent's (itself for one that is not a child).
_TOP = (
    "WITH RECURSIVE up(id, parent, depth) AS ("
    "SELECT id, task_parent_id, 0 FROM conversations WHERE id = ? UNION ALL "
    "SELECT c.id, c.task_parent_id, up.depth + 1 FROM conversations c "
    "JOIN up ON c.id = up.parent WHERE up.depth < 16) "
    "SELECT id FROM up ORDER BY depth DESC LIMIT 1"
)


def _hits(
    db: sqlite3.Connection,
    index: sqlite3.Connection,
    match: str,
    best: list[Any],
    make: MakeHit[H],
) -> list[H]:
    """A hit for each (conversation id, rowid, entry id, kind, score) of `best`, with the
    snippet `index` cuts from that entry for `match`. A match in a subagent's
    conversation is its top-level session's hit (sessions are listed top-level only; the
    child is reached from its parent), unless that session has a better one already."""
    hits = []
    seen: set[str] = set()
    for conversation_id, rowid, entry_id, kind, score in best:
        top = db.execute(_TOP, (conversation_id,)).fetchone()
        shown = top[0] if top is not None else conversation_id
        if shown in seen:
            continue
        seen.add(shown)
        conv = db.execute(
            f"SELECT {HIT_COLUMNS} FROM conversations WHERE id = ?", (shown,)
        ).fetchone()
        snippet = index.execute(
            "SELECT snippet(entries_fts, 0, ?, ?, '…', 16) FROM entries_fts "
            "WHERE entries_fts MATCH ? AND rowid = ?",
            (_OPEN, _CLOSE, match, rowid),
        ).fetchone()
        if conv is None or snippet is None:
            continue
        hits.append(make(tuple(conv), entry_id, kind, float(score), _spans(snippet[0])))
    return hits


def _search_positions(db: sqlite3.Connection, match: str, make: MakeHit[H], limit: int) -> list[H]:
    """`match` (a phrase or NEAR query) over the newest PHRASE_RANKED entries holding its
    words, indexed with positions in a database in memory; bm25 ranks among those."""
    candidates = db.execute(
        "SELECT f.rowid, e.text, e.conversation_id, e.id, e.kind FROM entries_fts f "
        "JOIN entries e ON e.rowid = f.rowid WHERE entries_fts MATCH ? "
        "ORDER BY f.rowid DESC LIMIT ?",
        (_without_positions(match), PHRASE_RANKED),
    ).fetchall()
    if not candidates:
        return []
    found = {row[0]: row[2:] for row in candidates}
    index = sqlite3.connect(":memory:")
    try:
        index.execute(
            f"CREATE VIRTUAL TABLE entries_fts USING fts5 (text, tokenize = '{TOKENIZE}')"
        )
        index.executemany(
            "INSERT INTO entries_fts (rowid, text) VALUES (?, ?)", (r[:2] for r in candidates)
        )
        best: dict[str, tuple[Any, ...]] = {}
        for rowid, score in index.execute(
            "SELECT rowid, rank FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rank",
            (match,),
        ):
            conversation_id, entry_id, kind = found[rowid]
            best.setdefault(conversation_id, (conversation_id, rowid, entry_id, kind, score))
            if len(best) >= limit:
                break
        return _hits(db, index, match, list(best.values()), make)
    finally:
        index.close()


def _without_positions(match: str) -> str:
    """`match` with each string of several words (a phrase; `a_b` is one too) made the
    AND of its words, NEAR groups made plain groups and `+`/`^` dropped: a query the
    index answers that matches every entry `match` does, and perhaps more."""
    import re

    word = re.compile(_WORD)
    out: list[str] = []
    parts = re.findall(_QUERY_PART, match)
    after_comma = in_braces = False
    for i, part in enumerate(parts):
        if after_comma and part.isdigit():  # NEAR's distance
            after_comma = False
            continue
        after_comma = part == ","
        in_braces = (in_braces or part == "{") and part != "}"
        if part in {",", "+", "^"} or (part == "NEAR" and parts[i + 1 : i + 2] == ["("]):
            continue
        if part == "*" and out:  # a prefix: onto the last word
            last = out[-1]
            out[-1] = f"{last[:-1]}*)" if last.endswith('")') else f"{last}*"
            continue
        operator = part in {"AND", "OR", "NOT"}
        starts = not operator and (part == "(" or part[0] == '"' or word.match(part))
        if starts and not in_braces and out and _ends_operand(out[-1]):
            out.append("AND")  # between groups there is no implied AND
        text = part[1:-1].replace('""', '"') if part.startswith('"') else part
        words = [] if operator else word.findall(text)
        out.append("(" + " AND ".join(f'"{w}"' for w in words) + ")" if len(words) > 1 else part)
    return " ".join(out)


def _ends_operand(part: str) -> bool:
    return part not in {"AND", "OR", "NOT", "(", ":", "-", "{"} and part[0] != "{"


def _spans(snippet: str) -> Spans:
    """The snippet as (text, matched) pieces, with line breaks and runs of spaces as one space."""
    spans: list[tuple[str, bool]] = []
    for i, part in enumerate(snippet.split(_OPEN)):
        matched, _, rest = part.partition(_CLOSE) if i else ("", "", part)
        if matched:
            spans.append((_one_space(matched), True))
        rest = _one_space(rest)
        if rest:
            spans.append((rest.lstrip() if not spans else rest, False))
    return tuple(s for s in spans if s[0])


def _one_space(text: str) -> str:
    """`text` with each run of whitespace made one space (`re.sub(r"\\s+", " ", text)`)."""
    words = text.split()
    if not words:
        return " " if text else ""
    before = " " if text[0].isspace() else ""
    after = " " if text[-1].isspace() else ""
    return before + " ".join(words) + after
