"""Checkpoint marks across a kill (runtime.store.marks): SIGKILL the real `bastion -p`
right after its Nth checkpoint of streamed reasoning and text commits, read the
ledger, resume, read it again. Every event read before the resume reads back the
same after it (the checkpoints then come from sealed marks and the interrupted
entry, not from open chunks), none is lost or doubled, and replaying the ledger
through the reducer gives the store's snapshot."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import pytest

from runtime import Harness
from runtime.model.events import DurableEvent
from runtime.model.views import ConversationView, reduce
from runtime.store import ledger
from tests.e2e.test_crash_matrix import run_bastion

pytestmark = pytest.mark.e2e

REASONING = "Weigh it first. " * 12
TEXT = "".join(f"line {i:04d} of the answer\n" for i in range(120))


def events(home: Path, conv_id: str) -> list[DurableEvent]:
    db = sqlite3.connect(f"file:{home / 'bastion.sqlite'}?mode=ro", uri=True)
    try:
        return ledger.read(db, conv_id, 0, 1_000_000)
    finally:
        db.close()


async def replayed(home: Path, conv_id: str) -> tuple[list[tuple], list[tuple]]:
    harness = await Harness.open(home / "bastion.sqlite")
    try:
        snap = await harness.snapshot(conv_id)
        view = ConversationView(conversation=snap.conversation, version=0)
        for event in await harness.ledger(conv_id):
            view = reduce(view, event)
        return (
            [(e.id, e.status, e.text) for e in view.entries],
            [(e.id, e.status, e.text) for e in snap.entries],
        )
    finally:
        await harness.close()


@pytest.mark.parametrize("nth", [1, 2, 4, 7])
def test_checkpoints_read_back_the_same_after_a_kill_and_the_resume(loopback, bastion, nth):
    server = loopback(
        [{"reasoning": REASONING, "text": TEXT, "chunk_size": 6, "delay_ms": 4, "repeat": True}]
    )
    b = bastion(server)
    b.env["BASTION_MODEL"] = "openai/test"
    sid = str(uuid.uuid4())
    killed = run_bastion(b, "-p", "--session-id", sid, "go", failpoint=f"checkpoint.1:{nth}")
    assert killed.returncode == -9, killed.stderr
    before = events(b.home, sid)
    appended = [e for e in before if e.type.endswith("_appended")]
    assert len(appended) >= nth
    assert [e.version for e in before] == list(range(1, len(before) + 1))

    done = run_bastion(b, "-p", "--resume", sid, failpoint=None)
    assert done.returncode == 0, done.stderr
    after = events(b.home, sid)
    assert after[: len(before)] == before
    assert [e.version for e in after] == list(range(1, len(after) + 1))
    closed = [e for e in after[len(before) :] if e.type == "entry.closed"]
    assert closed[0].status == "interrupted"
    assert closed[0].entry_id == appended[0].entry_id
    db = sqlite3.connect(b.home / "bastion.sqlite")
    try:
        open_chunks = db.execute("SELECT count(*) FROM chunks WHERE seq IS NOT NULL").fetchone()
    finally:
        db.close()
    assert open_chunks == (0,)
    view, snapshot = asyncio.run(replayed(b.home, sid))
    assert view == snapshot
    assert snapshot[-1] == (snapshot[-1][0], "complete", TEXT)
