"""Named crash points, for the crash-matrix tests of the real command.

`BASTION_FAILPOINT=NAME` (or `NAME:N`, the Nth time it is reached) makes the
process SIGKILL itself when the harness reaches that point: the test then
resumes the session and checks that nothing committed was lost and nothing
ran twice. Unset (always, outside tests), `hit` is one global lookup.

The points sit where the durable order changes hands: after admission, after
a checkpoint, between a call's intent and its start, between a call's start
and its result, after a result and before the next request, while an approval
waits, during recovery.
"""

from __future__ import annotations

import os
import signal

_spec = os.environ.get("BASTION_FAILPOINT") or None
_counts: dict[str, int] = {}


def _parse(spec: str) -> tuple[str, int]:
    name, _, nth = spec.partition(":")
    return name, int(nth) if nth else 1


_target = _parse(_spec) if _spec else None


def hit(name: str) -> None:
    """SIGKILL this process if `name` is the armed point (on its Nth arrival)."""
    if _target is None or _target[0] != name:
        return
    _counts[name] = count = _counts.get(name, 0) + 1
    if count == _target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
