"""The content matcher behind search_files: batches of files, one RE2 pass each.

Files are read whole and joined (with a newline between them) into batches of
about a megabyte. One literal scan (or one regex scan when no literal is known)
covers a whole batch without holding the GIL, so a batch with no match costs a
single call however many files it holds. Hits are mapped back to their file by
offset; lines never cross a file boundary, and the newline added between files
never produces a line of its own.

With tools._native, a search never comes here for files without context lines:
its Readers (tools/search_native.py) read and match them, one file at a time;
this scan stays for context lines and as the fallback and reference.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

LONG_LINE = 8 * 1024
BINARY_PROBE = 8 * 1024
BATCH_BYTES = 1 << 20
# A literal this long is found faster by bytes.find (it skips ahead by the
# literal's length) than by RE2, which stops at every occurrence of the first
# byte; for short literals RE2's memchr wins (measured on the bench tree).
LONG_LITERAL = 8

Context = list[list[Any]]  # [[line number, text], ...]
Hit = dict[str, Any]  # {"path", "line", "text"[, "before", "after"]}: the result's own dict


class Tally:
    __slots__ = ("binary", "files", "long_lines", "matched_files", "unreadable")

    def __init__(self) -> None:
        self.files = 0
        self.matched_files = 0
        self.binary = 0
        self.long_lines = 0
        self.unreadable = 0

    def add(self, other: Tally) -> None:
        self.files += other.files
        self.matched_files += other.matched_files
        self.binary += other.binary
        self.long_lines += other.long_lines
        self.unreadable += other.unreadable


class Batch:
    """Files read for one scan (with a literal, usually only those holding it)."""

    __slots__ = ("chunks", "paths", "size")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.chunks: list[bytes] = []
        self.size = 0

    def add(self, path: str, data: bytes) -> None:
        self.paths.append(path)
        self.chunks.append(data)
        self.size += len(data) + 1


def _line(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", "replace").rstrip("\r")


def is_binary(data: bytes) -> bool:
    """A NUL in the first BINARY_PROBE bytes: skipped (and counted) as it is read."""
    return data.find(b"\x00", 0, BINARY_PROBE) >= 0


def layout(chunks: list[bytes]) -> tuple[list[int], list[int]]:
    """Where each file of a batch starts and ends in the joined buffer."""
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for chunk in chunks:
        starts.append(pos)
        pos += len(chunk)
        ends.append(pos)
        pos += 1
    return starts, ends


def _finder(literal: bytes) -> Callable[[object, bytes, int, int], tuple[tuple[int, int]]]:
    """bytes.find behind the RE2 ``Match(anchor, text, pos, endpos)`` shape."""
    width = len(literal)

    def find(_: object, data: bytes, pos: int, end: int) -> tuple[tuple[int, int]]:
        at = data.find(literal, pos, end)
        return ((at, at + width),)

    return find


def _contains(literal: bytes, find: Any, anchor: object) -> Callable[[bytes], bool]:
    if len(literal) >= LONG_LITERAL:
        return lambda data: literal in data
    return lambda data: find(anchor, data, 0, len(data))[0][0] >= 0


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
        # ``contains(data)``: whether a file holds the literal (checked as it is read,
        # while its bytes are still in cache), or None without a literal.
        self.contains: Callable[[bytes], bool] | None = None
        if literal is not None:
            self.contains = _contains(literal, self.find, self.anchor)
        self.literal_bytes = literal or None
        self.source: bytes = regex.pattern
        self.literal_mode: bool = regex.options.literal
        self._native_regex: Any = False  # not compiled yet

    def native_regex(self, lib: Any) -> Any:
        """The pattern compiled by tools._native's RE2 (matched without the GIL), or
        None where that RE2 refuses it: then google-re2 is called from the scan."""
        if self._native_regex is False:
            try:
                self._native_regex = lib.Regex(self.source, self.literal_mode)
            except ValueError:
                self._native_regex = None
        return self._native_regex

    def search(self, batch: Batch, limit: int) -> tuple[list[Hit], Tally, int]:
        """Matching lines of one batch, in order, at most ``limit``, and the output
        size they account for. Each hit is the result's own dict (no second copy).
        Batches hold no binary files (they are skipped as they are read)."""
        return self.search_python(batch, limit)

    def search_python(self, batch: Batch, limit: int) -> tuple[list[Hit], Tally, int]:
        tally = Tally()
        chunks, paths = batch.chunks, batch.paths
        find, match, anchor = self.find, self.match, self.anchor
        if not chunks:
            return [], tally, 0
        data = chunks[0] if len(chunks) == 1 else b"\n".join(chunks)
        size = len(data)
        first, last = find(anchor, data, 0, size)[0]
        if first < 0:
            return [], tally, 0
        starts, ends = layout(chunks)
        trusted = self.exact or not self.literal  # the span found is a real match
        context = self.context
        crlf = data.find(b"\r") >= 0
        rfind, nextline, count = data.rfind, data.find, data.count
        hits: list[Hit] = []
        add = hits.append
        out = found = k = lo = counted = 0
        hi = -1  # no file entered yet
        number, fresh, path, cost = 1, False, "", 0
        while True:
            if not lo <= first <= hi:  # entered another file
                k = bisect_right(starts, first) - 1
                lo, hi = starts[k], ends[k]
                number, counted, fresh = 1, lo, True
                path = paths[k]
                cost = len(path) + 12
            if first == hi and (hi == lo or data[hi - 1] == 10):
                # past the file's final newline (the separator's own line): no line
                if hi + 1 > size:
                    break
                first, last = find(anchor, data, hi + 1, size)[0]
                if first < 0:
                    break
                continue
            start = rfind(b"\n", lo, first) + 1 or lo
            end = nextline(b"\n", first, hi)
            if end < 0:
                end = hi
            if end - start > LONG_LINE:
                tally.long_lines += 1
            elif (trusted and last <= end) or match(anchor, data, start, end)[0][0] >= 0:
                number += count(b"\n", counted, start)
                counted = start
                if fresh:
                    tally.matched_files += 1
                    fresh = False
                text = data[start:end].decode("utf-8", "replace")
                if crlf:
                    text = text.rstrip("\r")
                out += cost + len(text)
                if context:
                    before, after = self.around(data, start, end, number, lo, hi)
                    if before or after:
                        out += sum(len(t) + 8 for _, t in before)
                        out += sum(len(t) + 8 for _, t in after)
                        add(
                            {
                                "path": path,
                                "line": number,
                                "text": text,
                                "before": before,
                                "after": after,
                            }
                        )
                    else:
                        add({"path": path, "line": number, "text": text})
                else:
                    add({"path": path, "line": number, "text": text})
                found += 1
                if found >= limit:
                    break
            if end + 1 > size:
                break
            first, last = find(anchor, data, end + 1, size)[0]
            if first < 0:
                break
        return hits, tally, out

    def around(
        self, data: bytes, start: int, end: int, number: int, lo: int, hi: int
    ) -> tuple[Context, Context]:
        before: Context = []
        pos = start
        for n in range(1, self.context + 1):
            if pos <= lo:
                break
            prev = data.rfind(b"\n", lo, pos - 1) + 1
            prev = max(prev, lo)
            before.append([number - n, _line(data, prev, pos - 1)[:LONG_LINE]])
            pos = prev
        before.reverse()
        after: Context = []
        pos = end + 1
        for n in range(1, self.context + 1):
            if pos >= hi:
                break
            nxt = data.find(b"\n", pos, hi)
            nxt = hi if nxt < 0 else nxt
            after.append([number + n, _line(data, pos, nxt)[:LONG_LINE]])
            pos = nxt + 1
        return before, after
