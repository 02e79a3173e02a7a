"""Issue 25, item 11: the file bytes kept for /rewind are shared by content hash.

Before, every edit kept the file's previous bytes (up to 16 MB) in its own row and
every fork or rewind copied them again; `sessions rm` left nothing to count them by.
Now they are stored once per sha256 (migration 7 moves the old rows), forks name
them, `bastion doctor` counts them and `sessions rm` reclaims what nothing names.
"""

from __future__ import annotations

import hashlib
import sqlite3

from runtime.store import blobs, migrations
from tests.runtime.test_restore import call, session
from tui import doctor

BEFORE = b"the previous bytes\n" * 500


def kept(tmp_path) -> blobs.KeptBytes:
    db = sqlite3.connect(tmp_path / "bastion.sqlite")
    try:
        return blobs.kept_bytes(db)
    finally:
        db.close()


async def test_shared_file_bytes_forks_share_and_sessions_rm_reclaims(
    tmp_path, monkeypatch
) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    (work / "f.txt").write_bytes(BEFORE)
    harness, conv, _ = await session(tmp_path, work, [
        call(1, "write_file", path="f.txt", content="after\n", overwrite=True),
    ])  # fmt: skip
    forks = [await harness.fork(conv.id) for _ in range(3)]
    now = kept(tmp_path)
    assert (now.blobs, now.size, now.references) == (1, len(BEFORE), 4)  # stored once
    assert "1 files" in now.line() and "4 references" in now.line()

    copied = next(e for e in (await harness.snapshot(forks[0].id)).entries if e.text == "do stuff")
    plan = await harness.restore_plan(forks[0].id, copied.id)
    assert [(f.path, f.content) for f in plan.files] == [("f.txt", BEFORE)]

    await harness.delete_conversation(conv.id)
    assert kept(tmp_path).blobs == 1  # the forks still name it
    monkeypatch.setenv("BASTION_HOME", str(tmp_path))
    said = doctor.store()
    assert said.ok and "file bytes kept for /rewind: 1 files, 0.0 MB, 3 references" in said.line
    for fork in forks:
        await harness.delete_conversation(fork.id)
    assert kept(tmp_path) == blobs.KeptBytes(0, 0, 0, 0)  # reclaimed
    await harness.close()


def test_shared_file_bytes_migration_moves_inline_bytes_once(tmp_path) -> None:
    db = sqlite3.connect(tmp_path / "old.sqlite")
    for _number, _name, fn in migrations.MIGRATIONS[:6]:  # a store of schema 6
        fn(db)
    for n in range(3):  # three calls kept the same bytes, a fourth other bytes
        db.execute(
            "INSERT INTO call_effects (tool_call_id, conversation_id, kind, path, content, "
            "detail, created_at) VALUES (?, 'c', 'file', 'f.txt', ?, '{}', 0)",
            (f"call{n}", BEFORE),
        )
    db.execute(
        "INSERT INTO call_effects (tool_call_id, conversation_id, kind, path, content, detail, "
        "created_at) VALUES ('other', 'c', 'file', 'g.txt', X'00ff', '{}', 0)"
    )
    migrations.MIGRATIONS[6][2](db)
    assert blobs.kept_bytes(db) == blobs.KeptBytes(2, len(BEFORE) + 2, 4, 0)
    assert db.execute("SELECT COUNT(*) FROM call_effects WHERE content IS NOT NULL").fetchone() == (
        0,
    )
    sha = hashlib.sha256(BEFORE).hexdigest()
    assert db.execute("SELECT content FROM file_blobs WHERE sha256 = ?", (sha,)).fetchone() == (
        BEFORE,
    )
    db.close()


async def test_shared_file_bytes_size_cap_drops_the_oldest_and_restore_says_so(tmp_path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    (work / "f.txt").write_bytes(BEFORE)
    (work / "g.txt").write_bytes(b"g before\n")
    harness, conv, message = await session(tmp_path, work, [
        call(1, "write_file", path="f.txt", content="after\n", overwrite=True),
        call(2, "write_file", path="g.txt", content="g after\n", overwrite=True),
    ])  # fmt: skip
    db = sqlite3.connect(tmp_path / "bastion.sqlite")
    db.execute("UPDATE file_blobs SET created_at = 0 WHERE size = ?", (len(BEFORE),))
    assert blobs.cap(db, limit=100) == 1  # the oldest (f.txt's) goes; g.txt's fits
    db.commit()
    db.close()
    plan = await harness.restore_plan(conv.id, message.id)
    assert [(f.path, f.content) for f in plan.files] == [("g.txt", b"g before\n")]
    [why] = plan.cannot_undo
    assert why.startswith("f.txt: its bytes from before write_file were dropped") and "cap" in why
    await harness.restore(plan)
    assert (work / "f.txt").read_text() == "after\n"  # left alone, not deleted
    assert (work / "g.txt").read_text() == "g before\n"
    await harness.close()
