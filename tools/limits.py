"""Bounds for the walking tools (list, glob, search) and the coverage they report.

Every walking result carries ``coverage: {complete, reasons}`` so that an empty
result from a partial walk never reads as "nothing found".
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple


class Limits(NamedTuple):
    max_files: int = 10_000
    max_directories: int = 1_000
    max_entries: int = 20_000
    max_content_bytes: int = 16 * 1024 * 1024
    max_output_bytes: int = 64 * 1024
    time_budget_s: float = 5.0
    max_results: int = 100

    @classmethod
    def unbounded(cls) -> Limits:
        """Limits large enough that a whole realistic tree is covered (benchmarks)."""
        big = 1 << 40
        return cls(big, big, big, big, big, 3600.0, big)


class Budget:
    """Mutable counters for one walk; ``reasons`` explain any incompleteness."""

    __slots__ = (
        "content_bytes",
        "deadline",
        "directories",
        "entries",
        "files",
        "limits",
        "notes",
        "output_bytes",
        "reasons",
        "stopped",
    )

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.time_budget_s
        self.files = 0
        self.directories = 0
        self.entries = 0
        self.content_bytes = 0
        self.output_bytes = 0
        self.reasons: list[str] = []
        self.notes: list[str] = []
        self.stopped = False

    def stop(self, reason: str) -> None:
        self.stopped = True
        if reason not in self.reasons:
            self.reasons.append(reason)

    def incomplete(self, reason: str) -> None:
        """Record a reason the result is partial without stopping the walk."""
        if reason not in self.reasons:
            self.reasons.append(reason)

    def out_of_time(self) -> bool:
        if time.monotonic() > self.deadline:
            self.stop(f"time budget of {self.limits.time_budget_s:g}s exhausted")
        return self.stopped

    def take_directory(self) -> bool:
        if self.directories >= self.limits.max_directories:
            self.stop(f"directory limit ({self.limits.max_directories}) reached")
            return False
        self.directories += 1
        return True

    def take_entry(self) -> bool:
        if self.entries >= self.limits.max_entries:
            self.stop(f"entry limit ({self.limits.max_entries}) reached")
            return False
        self.entries += 1
        return True

    def take_file(self, size: int) -> bool:
        if self.files >= self.limits.max_files:
            self.file_limit_reached()
            return False
        if self.content_bytes + size > self.limits.max_content_bytes:
            self.content_limit_reached()  # skip this file but go on: smaller ones may fit
            return False
        self.files += 1
        self.content_bytes += size
        return True

    def file_limit_reached(self) -> None:
        self.stop(f"file limit ({self.limits.max_files}) reached")

    def content_limit_reached(self) -> None:
        self.incomplete(
            f"content limit ({self.limits.max_content_bytes} bytes) reached; "
            "some files were not searched"
        )

    def take_output(self, size: int) -> bool:
        if self.output_bytes + size > self.limits.max_output_bytes:
            self.stop(f"output limit ({self.limits.max_output_bytes} bytes) reached")
            return False
        self.output_bytes += size
        return True

    def coverage(self) -> dict[str, Any]:
        return {"complete": not self.reasons, "reasons": list(self.reasons + self.notes)}
