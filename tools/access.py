"""What a path is wanted for, and the host's hook that may deny it (imported by the
workspace and the tool context alike, so neither imports the other to share them)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum


class Access(StrEnum):
    READ = "read"
    WRITE = "write"


AuthorizePath = Callable[[str, Access], bool]
