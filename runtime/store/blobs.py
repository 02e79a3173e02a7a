"""File bytes kept for edits, shared by content hash (issue 25, item 11).

Before a write or edit, the file's previous bytes are kept so /rewind can put them
back (runtime.run.effects). They live in `file_blobs`, one row per sha256, and each
`call_effects` row names its bytes by `content_sha256`: the same bytes kept by
many calls, or copied by a fork or a rewind, are stored once. Deleting a
conversation (`sessions rm`) reclaims the bytes no call names any more, and the
store keeps at most CAP bytes of them: past it the oldest go first, and a /rewind
that needed them says it cannot restore that file (runtime.run.effects), never that
the file did not exist.

Functions take a sqlite3 connection (a Tx's `db`) inside the
caller's transaction.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from runtime.store.dialect import Db


__all__ = ["CAP", "KeptBytes", "cap", "keep", "kept_bytes", "reclaim"]

CAP = 2 << 30  # bytes of kept file contents a store holds at most (2 GiB)


def keep(db: Db, content: bytes, limit: int = CAP) -> str:
    """Store `content` once (then hold the store to `limit`); its sha256, for
    `call_effects.content_sha256`."""
    sha = hashlib.sha256(content).hexdigest()
    db.execute(
        "INSERT INTO file_blobs (sha256, content, size, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (sha, content, len(content), time.time()),
    )
    cap(db, max(limit, len(content)))  # what was just kept stays: it is the newest
    return sha


def cap(db: Db, limit: int = CAP) -> int:
    """Drop the oldest kept bytes until at most `limit` remain; how many were dropped."""
    (total,) = db.execute("SELECT COALESCE(SUM(size), 0) FROM file_blobs").fetchone()
    dropped = 0
    if total <= limit:
        return 0
    rows = db.execute("SELECT sha256, size FROM file_blobs ORDER BY created_at, sha256")
    for sha, size in rows.fetchall():
        if total <= limit:
            break
        db.execute("DELETE FROM file_blobs WHERE sha256 = ?", (sha,))
        total -= size
        dropped += 1
    return dropped


def reclaim(db: Db) -> None:
    """Delete the kept bytes no call names any more."""
    db.execute(
        "DELETE FROM file_blobs WHERE NOT EXISTS "
        "(SELECT 1 FROM call_effects f WHERE f.content_sha256 = file_blobs.sha256)"
    )


class KeptBytes(msgspec.Struct, frozen=True):
    """What `bastion doctor` says of the kept file bytes."""

    blobs: int  # distinct contents stored
    size: int  # their bytes
    references: int  # calls naming one (more than `blobs`: shared)
    unreferenced: int  # blobs no call names (reclaimed by the next `sessions rm`)

    def line(self) -> str:
        mb = self.size / 1_000_000
        shared = f", {self.references} references" if self.references else ""
        spare = f", {self.unreferenced} unreferenced" if self.unreferenced else ""
        return f"file bytes kept for /rewind: {self.blobs} files, {mb:.1f} MB{shared}{spare}"


def kept_bytes(db: Db) -> KeptBytes:
    blobs, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM file_blobs").fetchone()
    (references,) = db.execute(
        "SELECT COUNT(*) FROM call_effects WHERE content_sha256 IS NOT NULL"
    ).fetchone()
    (unreferenced,) = db.execute(
        "SELECT COUNT(*) FROM file_blobs WHERE NOT EXISTS "
        "(SELECT 1 FROM call_effects f WHERE f.content_sha256 = file_blobs.sha256)"
    ).fetchone()
    return KeptBytes(int(blobs), int(size), int(references), int(unreferenced))
