"""Make `schema9.sql` and `schema9_events.json`: a store written by bastion at schema 9
(checkpoints as ledger rows), for the migration test (tests/runtime/test_marks.py).

Run with a checkout of schema 9 first on the path (commit 760df56):

    PYTHONPATH=/path/to/that/checkout python tests/runtime/data/make_schema9.py OUT_DIR

Two answers streamed in small chunks with checkpoint_interval=0 (the first with
reasoning), then a third left streaming as a crash leaves it: its chunks
checkpointed, never closed. `schema9.sql` holds the rows of its tables (the
schema is migrations 1-9, which the test applies first; the full-text index is
filled by their triggers); the JSON holds every event the ledger read back and the
schema version that wrote them.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from runtime import Harness
from runtime.harness import new_conversation
from runtime.model.events import event_to_dict
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.run.deps import LoopSettings
from runtime.store import migrations
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn


async def make(path: Path, cwd: str) -> list[dict[str, object]]:
    provider = ScriptedProvider(
        [
            ScriptedTurn(
                text="First answer, streamed in pieces.", reasoning="think it over", chunk_size=5
            ),
            ScriptedTurn(text="Second answer: é and 😀 too.", chunk_size=4),
        ]
    )
    harness = await Harness.open(
        path,
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        loop_settings=LoopSettings(checkpoint_interval=0.0),
    )
    conv = new_conversation(cwd, settings={"model": "scripted/m"}, title="old store")
    await harness.drive(conv.id, interactive=False)
    for i, prompt in enumerate(("one", "two")):
        item = await harness.submit(conv.id, prompt, create=conv if i == 0 else None)
        await harness.wait(item.id, conv.id)
    await harness.release(conv.id)
    cid = conv.id
    partial = Entry(uuid7(), cid, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", time.time())

    def crashed(tx):  # type: ignore[no-untyped-def]
        entry = tx.add_entry(partial)
        end = 0
        for piece in ("cut ", "off ", "mid"):
            end = tx.append_chunk(entry.id, "text", end, piece)

    await harness.store.transact(cid, crashed)
    events = [event_to_dict(e) for e in await harness.store.ledger(cid)]
    await harness.close()
    return events


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bastion.sqlite"
        events = asyncio.run(make(path, "/old/project"))
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        version = migrations.current_version(db)
        skip = ('"entries_fts', '"meta"', '"migrations"', '"sqlite_', "sqlite_")
        dump = "\n".join(
            line
            for line in db.iterdump()
            if line.startswith("INSERT INTO ") and not line[12:].startswith(skip)
        )
        db.close()
    (out / "schema9.sql").write_text(dump + "\n")
    doc = {"schema_version": version, "events": events}
    (out / "schema9_events.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
