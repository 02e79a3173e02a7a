"""Checkpoint events of streamed text and reasoning, stored narrow.

A checkpoint (`entry.text_appended`, `entry.reasoning_appended`) is the commonest
durable event: about ten a second while an answer streams, each of 20-80
characters at the speeds models stream (200-800 characters a second). Its text is
in the chunk it wrote and, once the entry closes, in the entry; what the event
adds is only where and when: (seq, start, length, time). So it is not a ledger
row of its own:

- while the entry streams, the checkpoint's chunk row carries its `seq` and
  `time`, written in the same transaction as the chunk (runtime.store.tx);
- when the entry closes, or a retried attempt starts it over, the same
  transaction that drops the chunks seals their marks into one `ledger_marks`
  row per stream: the first seq and time, then about three bytes a checkpoint
  (`pack`). That row is append-only, like the ledger.

Reading the ledger (runtime.store.ledger.read) merges ledger rows, sealed marks
and open chunks: every checkpoint reads back at its own seq with its offset and
text, as it was published. Its time is kept to the millisecond. Chunks written
before this form (schema 10) have no seq: their events are ledger rows, read as
before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from runtime.model.events import DurableEvent, EntryReasoningAppended, EntryTextAppended

if TYPE_CHECKING:
    from runtime.store.dialect import Db


KINDS = ("text", "reasoning")  # the chunk kinds whose checkpoints are marks
TYPES = (EntryTextAppended.type, EntryReasoningAppended.type)
NO_BOUND = 1 << 62

#: One checkpoint: (seq, start, length, time).
Mark = tuple[int, int, int, float]


def _put(n: int, out: bytearray) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _take(data: bytes, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


def pack(marks: list[Mark]) -> tuple[int, float, bytes]:
    """(first seq, first time, the packed marks) of checkpoints in seq order.

    Each checkpoint is a head varint (seq step << 2, a gap before its start << 1,
    the clock stepped back), the gap if any, its length, and the milliseconds since
    the one before: three bytes for the usual checkpoint (a step of 1, no gap, under
    128 characters, under 128 ms)."""
    seq, end, clock = marks[0][0], 0, marks[0][3]
    first = (seq, clock)
    out = bytearray()
    for mark_seq, start, length, at in marks:
        if mark_seq < seq or start < end:
            raise ValueError(f"checkpoint marks out of order at seq {mark_seq}")
        gap, ms = start - end, round((at - clock) * 1000)
        _put((mark_seq - seq) << 2 | (gap > 0) << 1 | (ms < 0), out)
        if gap:
            _put(gap, out)
        _put(length, out)
        _put(abs(ms), out)
        seq, end, clock = mark_seq, start + length, clock + ms / 1000
    return first[0], first[1], bytes(out)


def unpack(seq: int, clock: float, data: bytes) -> Iterator[Mark]:
    at = end = 0
    while at < len(data):
        head, at = _take(data, at)
        gap = 0
        if head & 2:
            gap, at = _take(data, at)
        length, at = _take(data, at)
        ms, at = _take(data, at)
        seq, start = seq + (head >> 2), end + gap
        clock += (-ms if head & 1 else ms) / 1000
        end = start + length
        yield seq, start, length, clock


def seal(db: Db, conversation_id: str, owner_id: str) -> None:
    """Seal the open marks of `owner_id`'s streams, before its chunks are dropped."""
    for kind in KINDS:
        marks = db.execute(
            "SELECT seq, start, length(text), time FROM chunks WHERE owner_id = ? AND kind = ? "
            "AND conversation_id = ? AND seq IS NOT NULL ORDER BY start",
            (owner_id, kind, conversation_id),
        ).fetchall()
        if not marks:
            continue
        first, clock, packed = pack(marks)
        db.execute(
            "INSERT INTO ledger_marks (conversation_id, last_seq, first_seq, owner_id, kind, "
            "time, marks) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, marks[-1][0], first, owner_id, kind, clock, packed),
        )


def read(db: Db, conversation_id: str, after: int, upto: int) -> list[DurableEvent]:
    """The checkpoints of `conversation_id` with `after < seq <= upto`, sealed or open."""
    events: list[DurableEvent] = []
    texts: dict[tuple[str, str], str] = {}
    sealed = db.execute(
        "SELECT first_seq, time, marks, owner_id, kind FROM ledger_marks "
        "WHERE conversation_id = ? AND last_seq > ? AND first_seq <= ? ORDER BY last_seq",
        (conversation_id, after, upto),
    ).fetchall()
    for first, clock, packed, owner, kind in sealed:
        whole = texts.get((owner, kind))
        if whole is None:
            whole = texts[owner, kind] = _closed_text(db, owner, kind)
        for seq, start, length, _ in unpack(first, clock, packed):
            if after < seq <= upto:
                text = whole[start : start + length]
                events.append(_event(conversation_id, seq, kind, owner, start, text))
    open_ = db.execute(
        "SELECT c.seq, c.kind, c.owner_id, c.start, c.text FROM entries e "
        "JOIN chunks c ON c.owner_id = e.id AND c.kind IN ('text', 'reasoning') "
        "WHERE e.conversation_id = ? AND e.status = 'streaming' AND c.seq > ? AND c.seq <= ?",
        (conversation_id, after, upto),
    ).fetchall()
    for seq, kind, owner, start, text in open_:
        events.append(_event(conversation_id, seq, kind, owner, start, text))
    return events


def times(db: Db, kind: str = "text") -> list[tuple[str, int, float]]:
    """(conversation, seq, time) of every checkpoint of `kind`, sealed or open, in order."""
    out: list[tuple[str, int, float]] = []
    for cid, first, clock, packed in db.execute(
        "SELECT conversation_id, first_seq, time, marks FROM ledger_marks WHERE kind = ?", (kind,)
    ):
        out.extend((cid, seq, at) for seq, _, _, at in unpack(first, clock, packed))
    out.extend(
        db.execute(
            "SELECT conversation_id, seq, time FROM chunks WHERE kind = ? AND seq IS NOT NULL",
            (kind,),
        ).fetchall()
    )
    return sorted(out)


def _event(cid: str, seq: int, kind: str, owner: str, start: int, text: str) -> DurableEvent:
    if kind == "text":
        return EntryTextAppended(cid, seq, owner, start, text)
    return EntryReasoningAppended(cid, seq, owner, start, text)


def _closed_text(db: Db, owner_id: str, kind: str) -> str:
    """The text or reasoning an entry's checkpoints were joined into."""
    row = db.execute("SELECT text, data FROM entries WHERE id = ?", (owner_id,)).fetchone()
    if row is None:
        return ""
    if kind == "text":
        return str(row[0])
    data: dict[str, Any] = json.loads(row[1])
    return str(data.get("reasoning", ""))
