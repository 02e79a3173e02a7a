"""Where a long Markdown answer may be cut into segments rendered one by one.

Textual's `Markdown.append` re-reads the whole source and lays out every block
of the document on each update, so one widget for a 2 MB answer costs more per
token the longer it gets. An answer is therefore drawn as a run of Markdown
widgets of about `size` characters each: only the last one streams, finished
ones stay as they were drawn, and ones far off screen can be dropped and drawn
again from their text.

A cut goes only where rendering the two halves apart looks the same as rendering
them together: after a blank line, before a line at the left margin that starts a
paragraph, heading or fence (not a list item, quote, table row, indented code or
the inside of a fenced block), so no block is split and no list renumbers.
"""

from __future__ import annotations

import itertools
import re

from runtime.model.views import LiveText

__all__ = ["Splitter", "blocks"]

_NOT_A_BLOCK_START = re.compile(r"[ \t\-*+>|]|\d+[.)]([ \t]|$)|\[[^\]]*\]:")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
#: A link reference definition or an HTML block: a part of the text may need another
#: (a reference defined elsewhere), so such a text is not split into blocks.
_JOINED = re.compile(r"^ {0,3}(\[[^\]]*\]:|<)", re.MULTILINE)


def blocks(source: str) -> list[str]:
    """`source` cut at every place a `Splitter` may cut (of any size): its blocks, each
    rendered apart looking the same as rendered together, one blank line between. A
    last line not ended yet (a stream's) starts a block of its own only if it starts
    with a letter: a paragraph, whatever it goes on to say."""
    if _JOINED.search(source) is not None:
        return [source]
    splitter = Splitter(0)
    cuts = splitter.feed(LiveText.of(source))
    last = source.rfind("\n") + 1
    if last < len(source) and splitter.starts_paragraph(source[last:]):
        cuts.append(last)
    if not cuts:
        return [source]
    ends = [0, *cuts, len(source)]
    return [source[start:end] for start, end in itertools.pairwise(ends)]


class Splitter:
    """Finds cut offsets in a growing text, reading each line once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.cuts: list[int] = [0]  # segment starts; the first is always 0
        self._pos = 0  # offset of the first line not read yet
        self._blank = False  # the last line read was blank
        self._fence: str | None = None  # the fence of the code block we are inside

    def feed(self, text: LiveText) -> list[int]:
        """Read the complete lines of `text` past what was read; the new cuts found."""
        chunk = text.slice(self._pos)
        end = chunk.rfind("\n")
        if end < 0:
            return []
        found: list[int] = []
        start = self._pos
        for line in chunk[: end + 1].splitlines(keepends=True):
            if self._cut_before(line, start):
                self.cuts.append(start)
                found.append(start)
            self._read(line)
            start += len(line)
        self._pos = start
        return found

    def starts_paragraph(self, line: str) -> bool:
        """`line`, coming next, starts a paragraph after a blank line (a cut may go
        before it whatever follows): it starts with a letter, outside a fence."""
        return self._blank and self._fence is None and line[:1].isalpha()

    def _cut_before(self, line: str, start: int) -> bool:
        return (
            self._blank
            and self._fence is None
            and start - self.cuts[-1] >= self.size
            and bool(line.strip())
            and _NOT_A_BLOCK_START.match(line) is None
        )

    def _read(self, line: str) -> None:
        fence = _FENCE.match(line)
        if self._fence is None:
            if fence is not None:
                self._fence = fence.group(1)
        elif fence is not None and self._closes(fence.group(1), line[fence.end() :]):
            self._fence = None
        self._blank = not line.strip()

    def _closes(self, marker: str, rest: str) -> bool:
        assert self._fence is not None
        return marker[0] == self._fence[0] and len(marker) >= len(self._fence) and not rest.strip()
