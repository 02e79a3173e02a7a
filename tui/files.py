"""Files bastion writes for the user: a transcript is private.

`bastion export -o FILE` and the app's `/export` write a whole conversation (what
was asked, what the tools read, what commands printed): a new file is made 0600,
as the store is, and an existing one keeps its own mode (never widened).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_private"]

PRIVATE = 0o600


def write_private(path: Path, text: str, *, exclusive: bool = False) -> None:
    """Write `text` (UTF-8) to `path`: created 0600 if new (`exclusive`: only if new,
    else FileExistsError), truncated and rewritten in its own mode if it exists.
    OSError as `open` raises it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    data = text.encode("utf-8")
    fd = os.open(path, flags, PRIVATE)
    with open(fd, "wb") as handle:
        handle.write(data)
