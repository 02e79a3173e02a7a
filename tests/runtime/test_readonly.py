"""The read-only store (`runtime.store.readonly`): the harness's answers without the harness,
nothing written, and None (the harness opens it instead) for a store it cannot read as
it stands."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime import (
    AmbiguousId,
    Harness,
    ReadOnlyStore,
    SessionHit,
    SessionRow,
    UnknownConversation,
    default_home,
)
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.store.migrations import schema_version


async def _fill(harness: Harness) -> list[str]:
    """Three conversations in two folders, with searchable entries (one with a model)."""
    ids = []
    for n, (cwd, text) in enumerate(
        [("/a", "durable gardens"), ("/a", "durable ledger"), ("/b", "walrus tusks")]
    ):
        settings = {"model": "openai/gpt-4.1"} if n == 1 else None
        conv = await harness.create_conversation(cwd, title=f"t{n}", settings=settings)

        def fill(tx, cid=conv.id, text=text):
            for i, words in enumerate([text, f"answer about {text}"]):
                kind = EntryKind.USER if i == 0 else EntryKind.ASSISTANT
                tx.add_entry(Entry(uuid7(), cid, 0, kind, EntryStatus.COMPLETE, words, time.time()))

        await harness.store.transact(conv.id, fill)
        ids.append(conv.id)
    return ids


def rows(found):
    return [SessionRow.of(c) for c in found]


def hits(found):
    return [
        SessionHit(SessionRow.of(h.conversation), h.entry_id, h.entry_kind, h.score, h.spans)
        for h in found
    ]


async def test_answers_are_the_harness_answers_and_nothing_is_written():
    harness = await Harness.open()
    try:
        ids = await _fill(harness)
        # A prefix of the third id no other has: UUIDv7s made in one millisecond share
        # their first 13 characters (a fixed [:13] was ambiguous now and then).
        n = next(n for n in range(13, 37) if sum(i.startswith(ids[2][:n]) for i in ids) == 1)
        prefix = ids[2][:n]
        expected = {
            "all": rows(await harness.list_conversations(None)),
            "a": rows(await harness.list_conversations("/a")),
            "search": hits(await harness.search("durable")),
            "prefix": hits(await harness.search("walr")),
            "id": await harness.resolve_id(prefix),
            "short": await harness.short_ids(ids),
        }
    finally:
        await harness.close()
    path = default_home() / "bastion.sqlite"
    wal = path.with_name(path.name + "-wal")

    def stored() -> tuple[bytes, bytes]:
        return path.read_bytes(), wal.read_bytes() if wal.exists() else b""

    for _ in range(200):  # the harness's connections finish closing (a last checkpoint)
        if not wal.exists():
            break
        await asyncio.sleep(0.01)  # (poll interval)
    before = stored()
    with ReadOnlyStore.open() as store:  # type: ignore[union-attr]
        assert store.list_conversations(None) == expected["all"]
        assert store.list_conversations("/a") == expected["a"]
        assert len(expected["a"]) == 2
        assert store.search("durable") == expected["search"] and len(expected["search"]) == 2
        assert store.search("walr") == expected["prefix"] and expected["prefix"]
        models = sorted(row.model for row in expected["all"])
        assert models == ["", "", "openai/gpt-4.1"], models
        assert sorted(h.conversation.model for h in expected["search"]) == ["", "openai/gpt-4.1"]
        assert expected["search"][0].marked().count("[") == 1
        assert store.resolve_id(prefix) == expected["id"] == ids[2]
        assert store.short_ids(ids) == expected["short"]
        with pytest.raises(UnknownConversation):
            store.resolve_id("ffff")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._db.execute("DELETE FROM conversations")
    assert stored() == before
    # SQLite may make an empty -wal and a -shm for a reader of a WAL database when there
    # are none (read-only, it cannot remove them): as private as the store.
    for extra in path.parent.glob("bastion.sqlite-*"):
        assert extra.stat().st_mode & 0o077 == 0, extra


async def test_an_ambiguous_prefix_names_the_sessions_as_the_harness_does():
    harness = await Harness.open()
    try:
        ids = await _fill(harness)
        # UUIDv7 ids made in the same millisecond-ish share their first 8 digits.
        common = ids[0][:8]
        assert all(i.startswith(common) for i in ids)
        with pytest.raises(AmbiguousId) as from_harness:
            await harness.resolve_id(common)
    finally:
        await harness.close()
    store = ReadOnlyStore.open()
    assert store is not None
    with store, pytest.raises(AmbiguousId) as from_store:
        store.resolve_id(common)
    assert str(from_store.value) == str(from_harness.value)


@pytest.mark.parametrize("shift", [-1, 1])
async def test_a_store_of_another_schema_version_is_left_to_the_harness(shift):
    harness = await Harness.open()
    await harness.close()
    path = default_home() / "bastion.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(schema_version() + shift),)
    )
    db.commit()
    db.close()
    assert ReadOnlyStore.open() is None


def test_a_missing_store_is_left_to_the_harness(tmp_path: Path):
    assert ReadOnlyStore.open(tmp_path / "nowhere") is None
    assert not (tmp_path / "nowhere").exists()


async def test_session_commands_and_doctor_load_neither_asyncio_nor_the_harness():
    harness = await Harness.open()
    try:
        await _fill(harness)
    finally:
        await harness.close()
    code = (
        "import sys\n"
        "from tui.cli import main\n"
        "def loaded(*names):\n"
        "    return [m for m in names if m in sys.modules]\n"
        "for args in (['sessions', '--all'], ['sessions', 'search', 'durable'],"
        " ['sessions', '--json', 'search', 'walrus']):\n"
        "    assert main(args) == 0\n"
        "heavy = ('asyncio', 'runtime.harness', 'runtime.store.database', 'runtime.store.tx')\n"
        "assert not loaded(*heavy, 'dataclasses', 'runtime.model.records'), loaded(*heavy)\n"
        "main(['doctor'])  # (its exit code says whether this machine passes its checks)\n"
        "assert not loaded(*heavy), loaded(*heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert "durable" in done.stdout and "walrus" in done.stdout


def test_the_light_queries_select_the_columns_the_store_decodes():
    from runtime.store import ftsquery, readonly, rows

    assert ftsquery.HIT_COLUMNS == rows.CONVERSATION_COLUMNS
    assert rows.CONVERSATION_COLUMNS.startswith(readonly._ROW_COLUMNS + ",")


async def test_a_postgresql_store_leaves_the_session_commands_to_the_harness(tmp_path, monkeypatch):
    """With sessions kept in PostgreSQL (BASTION_STORE, or `store` in the user's config),
    a leftover SQLite file in the home is not where they are: the read-only queries
    step aside and the commands go through the harness, which opens the team store."""
    harness = await Harness.open()  # a local file with a session in it
    try:
        await _fill(harness)
    finally:
        await harness.close()
    with ReadOnlyStore.open() as store:
        assert store.list_conversations(None)
    monkeypatch.setenv("BASTION_STORE", "postgresql://me@db.example/team")
    assert ReadOnlyStore.open() is None
    monkeypatch.delenv("BASTION_STORE")
    config = tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('model = "openai/x"\n# store = "no: a comment"\n')
    assert ReadOnlyStore.open() is not None
    config.write_text('model = "openai/x"\n  store =  "postgresql://me@db.example/team"\n')
    assert ReadOnlyStore.open() is None
