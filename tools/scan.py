"""The content matcher behind search_files: batches of files, one RE2 pass each.

Files are read whole and joined (with a newline between them) into batches of
about a megabyte. One literal scan (or one regex scan when no literal is known)
covers a whole batch without holding the GIL, so a batch with no match costs a
single call however many files it holds. Hits are mapped back to their file by
offset; lines never cross a file boundary, and the newline added between files
never produces a line of its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

LONG_LINE = 8 * 1024
BINARY_PROBE = 8 * 1024
BATCH_BYTES = 1 << 20
# A literal this long is found faster by bytes.find (it skips ahead by the
# literal's length) than by RE2, which stops at every occurrence of the first
# byte; for short literals RE2's memchr wins (measured on the bench tree).
LONG_LITERAL = 8

Context = Sequence[tuple[int, str]]
Hit = tuple[str, int, str, Context, Context]
NONE: tuple[Context, Context] = ((), ())


@dataclass(slots=True)
class Tally:
    files: int = 0
    matched_files: int = 0
    binary: int = 0
    long_lines: int = 0
    unreadable: int = 0

    def add(self, other: Tally) -> None:
        self.files += other.files
        self.matched_files += other.matched_files
        self.binary += other.binary
        self.long_lines += other.long_lines
        self.unreadable += other.unreadable


@dataclass(slots=True)
class Batch:
    paths: list[str] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0

    def add(self, path: str, data: bytes) -> None:
        self.paths.append(path)
        self.chunks.append(data)
        self.size += len(data) + 1


def _line(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", "replace").rstrip("\r")


@dataclass(slots=True)
class Layout:
    """Where each file of a batch sits in the joined buffer."""

    starts: list[int]
    ends: list[int]
    skip: set[int]

    @classmethod
    def of(cls, chunks: list[bytes], data: bytes, tally: Tally) -> Layout:
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        for chunk in chunks:
            starts.append(pos)
            pos += len(chunk)
            ends.append(pos)
            pos += 1
        skip: set[int] = set()
        if data.find(b"\x00") >= 0:  # rare: find the binary files themselves
            skip = {i for i, c in enumerate(chunks) if c.find(b"\x00", 0, BINARY_PROBE) >= 0}
            tally.binary += len(skip)
        return cls(starts, ends, skip)


def _finder(literal: bytes) -> Callable[[object, bytes, int, int], tuple[tuple[int, int]]]:
    """bytes.find behind the RE2 ``Match(anchor, text, pos, endpos)`` shape."""
    width = len(literal)

    def find(_: object, data: bytes, pos: int, end: int) -> tuple[tuple[int, int]]:
        at = data.find(literal, pos, end)
        return ((at, at + width),)

    return find


class ContentMatcher:
    """Holds only immutable state, so worker threads can share one."""

    def __init__(self, regex: Any, literal: bytes | None, context: int, *, exact: bool) -> None:
        import re2

        self.match = regex._regexp.Match
        self.anchor = re2._Anchor.UNANCHORED
        self.exact = exact  # the pattern is the literal itself: no regex check needed
        self.context = context
        self.find = self.match
        self.literal = literal is not None
        self.scan_heavy = literal is None  # every byte goes through the regex
        if literal and len(literal) >= LONG_LITERAL:
            self.find = _finder(literal)
        elif literal:
            options = re2.Options()
            options.literal = True
            options.never_capture = True
            self.find = re2.compile(literal, options)._regexp.Match

    def search(self, batch: Batch, limit: int) -> tuple[list[Hit], Tally]:
        """Matching lines of one batch, in order, at most ``limit``."""
        tally = Tally()
        chunks, paths = batch.chunks, batch.paths
        find, match, anchor = self.find, self.match, self.anchor
        if self.literal and len(chunks) > 1:  # keep only files holding the literal
            keep = [
                i for i, chunk in enumerate(chunks) if find(anchor, chunk, 0, len(chunk))[0][0] >= 0
            ]
            if len(keep) < len(chunks):
                chunks, paths = [chunks[i] for i in keep], [paths[i] for i in keep]
        if not chunks:
            return [], tally
        data = chunks[0] if len(chunks) == 1 else b"\n".join(chunks)
        size = len(data)
        if find(anchor, data, 0, size)[0][0] < 0:
            return [], tally
        layout = Layout.of(chunks, data, tally)
        starts, ends, skip = layout.starts, layout.ends, layout.skip
        trusted = self.exact or not self.literal  # the span found is a real match
        hits: list[Hit] = []
        k = lo = hi = counted = pos = 0
        number, fresh = 1, False
        while pos <= size and len(hits) < limit:
            first, last = find(anchor, data, pos, size)[0]
            if first < 0:
                break
            if not lo <= first < hi:  # entered another file
                k = bisect_right(starts, first) - 1
                lo, hi = starts[k], ends[k]
                number, counted, fresh = 1, lo, True
                if first >= hi or k in skip:  # the separator's own line, or binary
                    pos = hi + 1
                    continue
            newline = data.rfind(b"\n", lo, first)
            start = lo if newline < 0 else newline + 1
            end = data.find(b"\n", first, hi)
            end = hi if end < 0 else end
            pos = end + 1
            if end - start > LONG_LINE:
                tally.long_lines += 1
                continue
            if not ((trusted and last <= end) or match(anchor, data, start, end)[0][0] >= 0):
                continue
            number += data.count(b"\n", counted, start)
            counted = start
            if fresh:
                tally.matched_files += 1
                fresh = False
            text = data[start:end].decode("utf-8", "replace").rstrip("\r")
            before, after = self.around(data, start, end, number, lo, hi) if self.context else NONE
            hits.append((paths[k], number, text, before, after))
        return hits, tally

    def around(
        self, data: bytes, start: int, end: int, number: int, lo: int, hi: int
    ) -> tuple[Context, Context]:
        before: list[tuple[int, str]] = []
        pos = start
        for n in range(1, self.context + 1):
            if pos <= lo:
                break
            prev = data.rfind(b"\n", lo, pos - 1) + 1
            prev = max(prev, lo)
            before.append((number - n, _line(data, prev, pos - 1)[:LONG_LINE]))
            pos = prev
        before.reverse()
        after: list[tuple[int, str]] = []
        pos = end + 1
        for n in range(1, self.context + 1):
            if pos >= hi:
                break
            nxt = data.find(b"\n", pos, hi)
            nxt = hi if nxt < 0 else nxt
            after.append((number + n, _line(data, pos, nxt)[:LONG_LINE]))
            pos = nxt + 1
        return before, after
