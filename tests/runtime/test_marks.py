"""Checkpoints kept as marks (runtime.store.marks): packed and read back exactly, the
ledger read in any batch size gives the same events, and a store written at schema 9
(checkpoints as ledger rows) upgrades and reads back the same events and views."""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from runtime import Harness
from runtime.harness import new_conversation
from runtime.model.events import event_to_dict, is_durable
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.model.views import ConversationView, reduce
from runtime.run.deps import LoopSettings
from runtime.store import marks, migrations
from runtime.store.database import Store
from runtime.store.tx import Tx
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn

DATA = Path(__file__).parent / "data"


def test_marks_pack_and_unpack_exactly_but_for_the_time_kept_to_the_millisecond():
    rng = random.Random(7)
    for _ in range(200):
        seq, start, clock = rng.randint(1, 10**6), 0, 1.8e9 + rng.random()
        made = []
        for _ in range(rng.randint(1, 60)):
            seq += rng.choice((1, 1, 1, 2, 3, 500))
            length = rng.choice((1, 20, 80, 200, 70_000))
            clock += rng.choice((0.1, 0.0004, 2.5, -0.3, 3600.0))  # the wall clock may step back
            made.append((seq, start, length, clock))
            start += length
        first, at, packed = marks.pack(made)
        back = list(marks.unpack(first, at, packed))
        assert [m[:3] for m in back] == [m[:3] for m in made]
        assert all(abs(a[3] - b[3]) <= 0.0005 + 1e-6 for a, b in zip(back, made, strict=True))
        assert len(packed) <= 12 * len(made)


def test_a_checkpoint_at_the_usual_pace_packs_into_three_bytes():
    """Seq step 1, no gap, 40 characters, 100 ms after the one before."""
    made = [(10 + i, 40 * i, 40, 1.8e9 + 0.1 * i) for i in range(100)]
    first, at, packed = marks.pack(made)
    assert (first, at, len(packed)) == (10, 1.8e9, 300)
    assert [m[:3] for m in marks.unpack(first, at, packed)] == [m[:3] for m in made]


def streaming(cid: str) -> Entry:
    return Entry(uuid7(), cid, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", time.time())


async def test_every_batch_size_reads_the_same_events_sealed_reset_and_open(tmp_path):
    """An answer closed (sealed marks), one reset and streamed again, one left open as a
    crash leaves it, interleaved with ordinary rows: read in batches of 1 to 9, the
    ledger gives the events published, in order, each once."""
    store = await Store.open(tmp_path / "s.sqlite")
    published = []
    conv, _ = await store.create_conversation(
        new_conversation(str(tmp_path)), publish=published.append
    )
    cid = conv.id

    def stream(entry_id: str, parts: list[tuple[str, str]]):
        def body(tx: Tx) -> None:
            ends = {"text": 0, "reasoning": 0}
            for kind, piece in parts:
                ends[kind] = tx.append_chunk(entry_id, kind, ends[kind], piece)

        return body

    one = await store.transact(
        cid, lambda tx: tx.add_entry(streaming(cid)), publish=published.append
    )
    await store.transact(
        cid, stream(one.id, [("reasoning", "hm"), ("text", "Hel"), ("reasoning", "m."), ("text", "lo é")]),
        publish=published.append,
    )  # fmt: skip
    await store.transact(
        cid, lambda tx: tx.close_entry(one.id, EntryStatus.COMPLETE, {}), publish=published.append
    )
    two = await store.transact(
        cid, lambda tx: tx.add_entry(streaming(cid)), publish=published.append
    )
    await store.transact(cid, stream(two.id, [("text", "lost ")]), publish=published.append)
    await store.transact(cid, lambda tx: tx.reset_entry(two), publish=published.append)
    await store.transact(
        cid, stream(two.id, [("text", "again"), ("text", "!")]), publish=published.append
    )
    await store.transact(
        cid, lambda tx: tx.close_entry(two.id, EntryStatus.COMPLETE, {}), publish=published.append
    )
    three = await store.transact(
        cid, lambda tx: tx.add_entry(streaming(cid)), publish=published.append
    )
    await store.transact(
        cid, stream(three.id, [("text", "cut "), ("text", "off")]), publish=published.append
    )

    whole = await store.ledger(cid)
    assert [e.version for e in whole] == list(range(1, len(whole) + 1))
    # The reset attempt's text was dropped with it (as before marks); all else as published.
    lost = {e.version for e in published if getattr(e, "text", None) == "lost "}
    assert len(lost) == 1
    assert [e for e in whole if e.version not in lost] == [
        e for e in published if e.version not in lost
    ]
    for size in range(1, 10):
        got, after = [], 0
        while batch := await store.ledger(cid, after, size):
            assert len(batch) <= size
            got.extend(batch)
            after = batch[-1].version
        assert got == whole, size
    rows = await store.read(
        lambda db: db.execute("SELECT count(*) FROM ledger_marks").fetchone()[0]
    )
    assert rows == 4  # one's text and reasoning, two's first attempt and second; three is open
    await store.close()


async def test_a_streamed_answer_writes_no_checkpoint_rows_and_replays_to_the_snapshot(tmp_path):
    provider = ScriptedProvider(
        [ScriptedTurn(text="An answer of some length. " * 20, reasoning="why " * 30, chunk_size=7)]
    )
    harness = await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=lambda spec: (provider, "m"),
        loop_settings=LoopSettings(checkpoint_interval=0.0),
    )
    sub = harness.subscribe()
    conv = new_conversation(str(tmp_path), settings={"model": "scripted/m"})
    await harness.drive(conv.id, interactive=False)
    item = await harness.submit(conv.id, "go", create=conv)
    await harness.wait(item.id, conv.id)
    stored = await harness.ledger(conv.id)
    published = [e for e in sub.pending() if is_durable(e) and e.conversation_id == conv.id]
    assert stored == published
    assert sum(e.type == "entry.text_appended" for e in stored) == -(-520 // 7)
    counts = await harness.store.read(
        lambda db: db.execute(
            "SELECT (SELECT count(*) FROM ledger WHERE type LIKE '%appended'), "
            "(SELECT count(*) FROM ledger_marks), (SELECT count(*) FROM chunks)"
        ).fetchone()
    )
    assert counts == (0, 2, 0)
    snap = await harness.snapshot(conv.id)
    view = ConversationView(conversation=snap.conversation, version=0)
    for event in stored:
        view = reduce(view, event)
    assert [(e.id, e.text, e.status) for e in view.entries] == [
        (e.id, e.text, e.status) for e in snap.entries
    ]
    await harness.close()


def load_schema9(path: Path) -> dict:
    """The store data/make_schema9.py wrote with bastion at schema 9: its schema made by
    migrations 1-9, then its rows."""
    db = sqlite3.connect(path, isolation_level=None)
    migrations.ensure_meta(db)
    for number, name, fn in migrations.MIGRATIONS[:9]:
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?, 0)", (number, name))
    db.execute("INSERT INTO meta VALUES ('schema_version', '9')")
    db.executescript((DATA / "schema9.sql").read_text())
    db.close()
    return json.loads((DATA / "schema9_events.json").read_text())


async def test_a_store_written_at_schema_9_upgrades_and_reads_back_the_same_events(tmp_path):
    path = tmp_path / "bastion.sqlite"
    old = load_schema9(path)
    assert old["schema_version"] == 9 < migrations.latest_version()
    store = await Store.open(path)
    cid = old["events"][0]["conversation_id"]
    assert [event_to_dict(e) for e in await store.ledger(cid)] == old["events"]
    # Its crashed partial is closed the way a resume closes it: the old checkpoint rows
    # then read their text from the entry, and new checkpoints are marks beside them.
    partial = old["events"][-1]["entry_id"]
    await store.transact(cid, lambda tx: tx.close_entry(partial, EntryStatus.INTERRUPTED, {}))
    fresh = await store.transact(cid, lambda tx: tx.add_entry(streaming(cid)))
    await store.transact(cid, lambda tx: tx.append_chunk(fresh.id, "text", 0, "new"))
    await store.transact(cid, lambda tx: tx.close_entry(fresh.id, EntryStatus.COMPLETE, {}))
    after = [event_to_dict(e) for e in await store.ledger(cid)]
    assert after[: len(old["events"])] == old["events"]
    assert [(e["type"], e.get("text")) for e in after[len(old["events"]) :]] == [
        ("entry.closed", None),
        ("entry.added", None),
        ("entry.text_appended", "new"),
        ("entry.closed", None),
    ]
    snap = await store.snapshot(cid)
    view = ConversationView(conversation=snap.conversation, version=0)
    for event in await store.ledger(cid):
        view = reduce(view, event)
    assert view.version == snap.conversation.version
    assert [(e.id, e.text, e.status) for e in view.entries] == [
        (e.id, e.text, e.status) for e in snap.entries
    ]
    assert [e.text for e in snap.entries if e.kind == "assistant"] == [
        "First answer, streamed in pieces.",
        "Second answer: é and 😀 too.",
        "cut off mid",
        "new",
    ]
    await store.close()


async def test_marks_are_append_only_and_go_with_their_conversation(tmp_path):
    path = tmp_path / "s.sqlite"
    store = await Store.open(path)
    keep, _ = await store.create_conversation(new_conversation(str(tmp_path)))
    gone, _ = await store.create_conversation(new_conversation(str(tmp_path)))
    for conv in (keep, gone):
        entry = await store.transact(conv.id, lambda tx, c=conv.id: tx.add_entry(streaming(c)))
        await store.transact(conv.id, lambda tx, e=entry.id: tx.append_chunk(e, "text", 0, "x"))
        await store.transact(
            conv.id, lambda tx, e=entry.id: tx.close_entry(e, EntryStatus.COMPLETE, {})
        )
    await store.delete_conversation(gone.id, live=lambda _: False)
    left = await store.read(
        lambda db: db.execute("SELECT conversation_id FROM ledger_marks").fetchall()
    )
    assert left == [(keep.id,)]
    await store.close()
    db = sqlite3.connect(path)
    for sql in ("UPDATE ledger_marks SET marks = x''", "DELETE FROM ledger_marks"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute(sql)
    db.close()
