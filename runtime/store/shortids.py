"""Session ids as people type and read them: any unique prefix, like git.

Ids are UUIDv7, so sessions made in the same minute share their first eight hex
digits. A prefix is compared on the hex digits alone (hyphens optional:
`0192f7a46c` and `0192f7a4-6c` name the same sessions); a shown short id is the
shortest prefix of at least SHOWN digits no other stored session shares,
written with the id's own hyphens so it can be pasted back.

The app's status line shows an id's last 8 digits (random, so they tell sessions
apart at a glance); those, 8 to 12 of the id's last digits, are taken too when no
id starts with them.

Pure functions and read-transaction helpers for `Harness.resolve_id` and
`Harness.short_ids`; nothing here writes.
"""

from __future__ import annotations

from runtime.model.errors import AmbiguousId, UnknownConversation

TYPE_CHECKING = False  # (typing costs the session commands ~5 ms to import)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from runtime.model.records import Conversation
    from runtime.store.dialect import Db

__all__ = [
    "MIN_TYPED",
    "SHOWN",
    "canonical_prefix",
    "read_ids",
    "read_matches",
    "short_ids",
    "typed_prefix",
]

MIN_TYPED = 4  # hex digits a typed prefix needs at least (as git asks)
SHOWN = 8  # hex digits a shown short id has at least
_HYPHENS_AFTER = (8, 12, 16, 20)  # hex digits before each of a UUID's hyphens
_HEX = frozenset("0123456789abcdef")
_LISTED = 5  # matching sessions an ambiguity names


def _hex(text: str) -> str:
    return text.strip().lower().replace("-", "")


def canonical_prefix(text: str) -> str | None:
    """`text` as the start of a canonical UUID string (lower case, the id's hyphens), or
    None when it cannot start one (not hex, or longer than a UUID)."""
    digits = _hex(text)
    if not digits or len(digits) > 32 or not set(digits) <= _HEX:
        return None
    return _with_hyphens(digits)


def _with_hyphens(digits: str) -> str:
    """Hex digits with a hyphen wherever a UUID string has one (only between digits)."""
    out = []
    for n, digit in enumerate(digits):
        if n in _HYPHENS_AFTER:
            out.append("-")
        out.append(digit)
    return "".join(out)


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def short_ids(ids: Iterable[str], among: Iterable[str] | None = None) -> dict[str, str]:
    """Each of `ids` -> its shortest prefix of at least SHOWN hex digits that no other id
    of `among` (default: `ids` themselves) starts with, hyphenated as the id is."""
    wanted = list(dict.fromkeys(ids))
    pool = sorted({_hex(i) for i in (wanted if among is None else [*among, *wanted])})
    index = {digits: n for n, digits in enumerate(pool)}
    out: dict[str, str] = {}
    for conv_id in wanted:
        digits = _hex(conv_id)
        n = index[digits]
        shared = max(
            (_common(digits, pool[m]) for m in (n - 1, n + 1) if 0 <= m < len(pool)),
            default=0,
        )
        out[conv_id] = _with_hyphens(digits[: max(SHOWN, shared + 1)])
    return out


def read_ids(db: Db) -> list[str]:
    """Every stored conversation's id."""
    return [row[0] for row in db.execute("SELECT id FROM conversations")]


def typed_prefix(text: str) -> str:
    """`text` as the start of a canonical id, checked before any store is opened:
    UnknownConversation when it cannot start one (not hex, longer than an id) or is
    shorter than MIN_TYPED digits."""
    prefix = canonical_prefix(text)
    if prefix is None or len(_hex(text)) < MIN_TYPED:
        why = "is not a session id" + (
            "" if prefix is None else f" (give at least {MIN_TYPED} of its characters)"
        )
        raise UnknownConversation(
            f"{text.strip()!r} {why}",
            hint="ids look like 0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e, and any unique start of "
            "one will do; list them with `bastion sessions --all`",
        )
    return prefix


def read_matches(db: Db, text: str) -> str:
    """The id of the one stored conversation `text` (a full id or a prefix) names.

    A full id comes back canonical whether it is stored or not (what it is used for
    says what is wrong with it: unknown, deleted). UnknownConversation when `text`
    cannot start an id, is too short, or starts none; AmbiguousId, naming the
    matches, when it starts more than one."""
    prefix = typed_prefix(text)
    if len(_hex(text)) == 32:
        return prefix
    from runtime.store.rows import CONVERSATION_COLUMNS, conversation_row  # (records: ~10 ms)

    rows = db.execute(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id >= ? AND id < ? "
        "ORDER BY updated_at DESC, id DESC LIMIT ?",
        (prefix, prefix + "~", _LISTED + 1),
    ).fetchall()
    found = [conversation_row(r) for r in rows]
    if not found and SHOWN <= len(_hex(text)) <= 12:  # the tail the app's status line shows
        rows = db.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id LIKE ? "
            "ORDER BY updated_at DESC, id DESC LIMIT ?",
            ("%-" + "_" * (12 - len(_hex(text))) + _hex(text), _LISTED + 1),
        ).fetchall()
        found = [conversation_row(r) for r in rows]
    if len(found) == 1:
        return found[0].id
    if not found:
        raise UnknownConversation(
            f"no session id starts with {prefix}", hint="list them with `bastion sessions --all`"
        )
    raise AmbiguousId.among(
        prefix, found, _short_of(found, read_ids(db)), more=len(found) > _LISTED
    )


def _short_of(found: Sequence[Conversation], every: Sequence[str]) -> dict[str, str]:
    return short_ids([c.id for c in found], every)
