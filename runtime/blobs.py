"""File bytes kept for edits, shared by content hash (issue 25, item 11).

Before a write or edit, the file's previous bytes are kept so /rewind can put them
back (runtime.effects). They live in `file_blobs`, one row per sha256, and each
`call_effects` row names its bytes by `content_sha256`: the same bytes kept by
many calls, or copied by a fork or a rewind, are stored once. Deleting a
conversation (`sessions rm`) reclaims the bytes no call names any more.

Functions take a sqlite3 connection (or a Tx: anything with `execute`) inside the
caller's transaction.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["KeptBytes", "keep", "kept_bytes", "reclaim"]


def keep(db: Any, content: bytes) -> str:
    """Store `content` once; its sha256, for `call_effects.content_sha256`."""
    sha = hashlib.sha256(content).hexdigest()
    db.execute(
        "INSERT OR IGNORE INTO file_blobs (sha256, content, size, created_at) VALUES (?, ?, ?, ?)",
        (sha, content, len(content), time.time()),
    )
    return sha


def reclaim(db: Any) -> None:
    """Delete the kept bytes no call names any more."""
    db.execute(
        "DELETE FROM file_blobs WHERE NOT EXISTS "
        "(SELECT 1 FROM call_effects f WHERE f.content_sha256 = file_blobs.sha256)"
    )


@dataclass(frozen=True, slots=True)
class KeptBytes:
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


def kept_bytes(db: Any) -> KeptBytes:
    blobs, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM file_blobs").fetchone()
    (references,) = db.execute(
        "SELECT COUNT(*) FROM call_effects WHERE content_sha256 IS NOT NULL"
    ).fetchone()
    (unreferenced,) = db.execute(
        "SELECT COUNT(*) FROM file_blobs WHERE NOT EXISTS "
        "(SELECT 1 FROM call_effects f WHERE f.content_sha256 = file_blobs.sha256)"
    ).fetchone()
    return KeptBytes(int(blobs), int(size), int(references), int(unreferenced))
