"""The store refuses what it cannot use without touching it, and keeps its ledger append-only."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from runtime.harness import Harness
from runtime.model.errors import SchemaTooNew, StoreError
from runtime.store.migrations import latest_version


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_new_file_is_migrated_and_versioned(tmp_path):
    harness = await Harness.open(tmp_path / "b.sqlite")
    await harness.close()
    db = sqlite3.connect(tmp_path / "b.sqlite")
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(latest_version()),
    )
    assert [r[0] for r in db.execute("SELECT version FROM migrations")] == list(
        range(1, latest_version() + 1)
    )
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_newer_schema_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "b.sqlite"
    harness = await Harness.open(path)
    await harness.create_conversation(str(tmp_path))
    await harness.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    before = digest(path)
    with pytest.raises(SchemaTooNew, match="999"):
        await Harness.open(path)
    assert digest(path) == before


async def test_corrupt_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "b.sqlite"
    path.write_bytes(b"this is not a database at all" * 100)
    before = digest(path)
    with pytest.raises(StoreError, match="corrupt or not a database"):
        await Harness.open(path)
    assert digest(path) == before


async def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "b.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not a Bastion database"):
        await Harness.open(path)


async def test_ledger_is_append_only_and_matches_version(tmp_path):
    path = tmp_path / "b.sqlite"
    harness = await Harness.open(path)
    conv = await harness.create_conversation(str(tmp_path), title="t")
    await harness.update_settings(conv.id, model="openai/x")
    events = await harness.store.ledger(conv.id)
    assert [e.version for e in events] == [1, 2]
    assert (await harness.get_conversation(conv.id)).version == 2
    await harness.close()
    db = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE ledger SET payload = '{}'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("DELETE FROM ledger")


async def test_delete_conversation_removes_its_ledger(tmp_path):
    harness = await Harness.open(tmp_path / "b.sqlite")
    keep = await harness.create_conversation(str(tmp_path))
    gone = await harness.create_conversation(str(tmp_path))
    await harness.delete_conversation(gone.id)
    assert await harness.store.ledger(gone.id) == []
    assert len(await harness.store.ledger(keep.id)) == 1
    await harness.close()


async def test_stray_tracebacks_an_abandoned_store_job_leaves_no_unread_error(tmp_path):
    """Issue 25, item 3: a job whose caller was cancelled ends in an error nobody awaits
    (CancelledError when it was dropped before it began, or its own error); it used to
    print "Future exception was never retrieved" on stderr of runs that succeeded."""
    import asyncio
    import gc
    import threading

    from runtime.store.database import Store

    store = await Store.open(tmp_path / "b.sqlite")
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    started, gate = threading.Event(), threading.Event()

    def busy(job):
        started.set()
        gate.wait(5)
        raise ValueError("failed after its caller left")

    try:
        under_way = asyncio.create_task(store._engine.writer.run(busy))
        await asyncio.to_thread(started.wait, 5)
        dropped = asyncio.create_task(store._engine.writer.run(lambda job: 1))
        await asyncio.sleep(0)  # (yield to the loop: the task submits its job, queued)
        for task in (under_way, dropped):
            task.cancel()
        for task in (under_way, dropped):
            with pytest.raises(asyncio.CancelledError):
                await task
        gate.set()
        assert await store._engine.writer.run(lambda job: 2) == 2  # both jobs have finished
        # (the thing under test: an error nobody read, had there been one, is reported
        # while the loop runs on, and when its future is collected)
        await asyncio.sleep(0.02)
        del under_way, dropped, task
        gc.collect()
        await asyncio.sleep(0.02)  # (as above)
    finally:
        gate.set()
        loop.set_exception_handler(None)
        await store.close()
    assert reported == []
