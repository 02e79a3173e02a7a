"""Named crash points, for the crash-matrix tests of the real command.

`BASTION_FAILPOINT=NAME` (or `NAME:N`, the Nth time it is reached) makes the
process SIGKILL itself when the harness reaches that point: the test then
resumes the session and checks that nothing committed was lost and nothing
ran twice. Unset (always, outside tests), `hit` is one global lookup.

The points sit where the durable order changes hands: after admission, after
a checkpoint, between a call's intent and its start, between a call's start
and its result, after a result and before the next request, while an approval
waits, during recovery.

Store faults are armed the same way: `BASTION_FAILPOINT=store.full:N` (or
`store.ioerr`, `store.locked`, `store.corrupt`) makes the Nth write transaction of
this process, and every one after it, fail inside its transaction with the error
SQLite gives for a full disk (an I/O error, a lock held past the timeout, a damaged
page), as a disk that stays full would: the tests of a storage failure need no root
and no small filesystem (`fault`, called by runtime.store.database). `store.full:@PATH`
fails every write once the file PATH exists: a test of another process makes the disk
"fill" at the moment it chooses (an answer streaming, a second terminal attached).
"""

from __future__ import annotations

import os
import signal
import sqlite3

_spec = os.environ.get("BASTION_FAILPOINT") or None
_counts: dict[str, int] = {}


def _parse(spec: str) -> tuple[str, int | str]:
    name, _, nth = spec.partition(":")
    if nth.startswith("@"):
        return name, nth[1:]  # (a store fault armed by a file: see `fault`)
    return name, int(nth) if nth else 1


_target = _parse(_spec) if _spec else None

#: What each store fault raises: SQLite's error code and its words.
FAULTS: dict[str, tuple[int, str]] = {
    "store.full": (sqlite3.SQLITE_FULL, "database or disk is full"),
    "store.ioerr": (sqlite3.SQLITE_IOERR, "disk I/O error"),
    "store.locked": (sqlite3.SQLITE_BUSY, "database is locked"),
    "store.corrupt": (sqlite3.SQLITE_CORRUPT, "database disk image is malformed"),
}


def arm(spec: str | None) -> None:
    """Arm `spec` (as `BASTION_FAILPOINT` would) in this process, or disarm (None): for
    tests that run the harness in their own process."""
    global _target
    _target = _parse(spec) if spec else None
    _counts.clear()


def fault() -> None:
    """In a write transaction: raise the armed store fault from its Nth arrival on."""
    if _target is None or _target[0] not in FAULTS:
        return
    name, when = _target
    _counts[name] = count = _counts.get(name, 0) + 1
    if os.path.exists(when) if isinstance(when, str) else count >= when:
        code, words = FAULTS[name]
        error = sqlite3.OperationalError(words)
        error.sqlite_errorcode = code  # (as SQLite's own errors carry it)
        raise error


def hit(name: str) -> None:
    """SIGKILL this process if `name` is the armed point (on its Nth arrival)."""
    if _target is None or _target[0] != name:
        return
    _counts[name] = count = _counts.get(name, 0) + 1
    if count == _target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
