"""Valid text from a model stream and from imported files: no surrogate gets past here.

JSON spells a character outside the Basic Multilingual Plane as a UTF-16
surrogate pair (`"\\ud83d\\ude00"` is U+1F600), and `json.loads` turns a pair
inside one string into the one character, but a pair split across two stream
events (`"\\ud83d"` in one delta, `"\\ude00"` in the next, which servers do when
they cut at UTF-16 units), or a lone surrogate, arrives as surrogate code points
in a `str`. Such a string cannot be encoded as UTF-8: SQLite, a socket or a
terminal refuses it with `UnicodeEncodeError`. So, at the boundary:

- `valid_stream` wraps a provider's stream (the model loop and compaction read
  every provider through it). Text, reasoning and each tool call's arguments
  are a channel of their own: a high surrogate at the end of a piece is held back
  and joined with a low surrogate that starts the next piece of the same
  channel into the one character it spells. Anything else that is a surrogate
  (a high one not followed by a low one, a low one alone, or a high one held
  when the stream ends) becomes U+FFFD, the replacement character. Tool names
  and call ids arrive whole, and are mended the same way on their own.
- `mend` is that rule for one whole string; `mend_tree` applies it to every
  string (keys too) of parsed JSON, for `bastion import`.
- File names are the other source: Python decodes a name that is not UTF-8 with
  `surrogateescape` (b"\\xff" becomes "\\udcff"). `escaped` writes each such byte
  out as `\\xff` (any other lone surrogate as `\\udxxx`), `escaped_tree` does it to a
  tool's result (`runtime.run.toolbox`): the name is shown, one way (the tools refuse
  a path that is not valid Unicode, so none is ever opened by its escaped form).
  `utf8` says whether a string (a workspace's path) can be stored at all.

Everything downstream sees valid `str`. The cost on the common path is one
`str.isascii()` (constant time) or one regex scan of the piece.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from runtime.model.llm import (
    ReasoningChunk,
    StreamEnd,
    StreamItem,
    TextChunk,
    ToolCallChunk,
)

__all__ = [
    "REPLACEMENT",
    "SurrogateJoiner",
    "escaped",
    "escaped_tree",
    "mend",
    "mend_tree",
    "utf8",
    "valid_stream",
]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def mend(text: str) -> str:
    """`text` with each surrogate pair joined and each lone surrogate made U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def mend_tree(value: Any) -> Any:
    """Parsed JSON with every string (and key) mended; other values as they were."""
    if isinstance(value, str):
        return mend(value)
    if isinstance(value, list):
        return [mend_tree(v) for v in value]
    if isinstance(value, dict):
        return {mend(k) if isinstance(k, str) else k: mend_tree(v) for k, v in value.items()}
    return value


def utf8(text: str) -> bool:
    """`text` holds no lone surrogate: it can be encoded as UTF-8 (and stored)."""
    return text.isascii() or _SURROGATE.search(text) is None


def _byte(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` with each lone surrogate written out: a byte `surrogateescape` could not
    decode as `\\xNN`, any other as `\\uXXXX` (pairs are first joined)."""
    if utf8(text):
        return text
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(_byte, text)


def escaped_tree(value: Any) -> Any:
    """JSON-able `value` with every string (and key) `escaped`; other values as they
    were, and `value` itself (not a copy) when nothing in it needed escaping."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, list | tuple):
        items = [escaped_tree(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [
            (escaped(k) if isinstance(k, str) else k, escaped_tree(v)) for k, v in value.items()
        ]
        same = all(
            k is k2 and v is v2 for (k, v), (k2, v2) in zip(value.items(), pairs, strict=True)
        )
        return value if same else dict(pairs)
    return value


class SurrogateJoiner:
    """One channel of streamed text: pieces in, valid text out, a pair split
    between two pieces joined. Call `flush` when the channel ends."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""  # a high surrogate that ended the previous piece

    def feed(self, piece: str) -> str:
        if not self._held and (piece.isascii() or _SURROGATE.search(piece) is None):
            return piece
        piece = self._held + piece
        self._held = ""
        if piece and _is_high(piece[-1]):
            piece, self._held = piece[:-1], piece[-1]
        return mend(piece)

    def flush(self) -> str:
        """What is still held, as U+FFFD (a high surrogate whose partner never came)."""
        held, self._held = self._held, ""
        return REPLACEMENT if held else ""


class _Channels:
    """The joiners of one stream: text, reasoning, and each tool call's arguments."""

    def __init__(self) -> None:
        self.text = SurrogateJoiner()
        self.reasoning = SurrogateJoiner()
        self.calls: dict[int, SurrogateJoiner] = {}

    def mend(self, item: StreamItem) -> StreamItem | None:
        """The item with valid text; None when all it carried is held back."""
        if isinstance(item, TextChunk):
            text = self.text.feed(item.text)
            return (TextChunk(text) if text is not item.text else item) if text else None
        if isinstance(item, ReasoningChunk):
            if item.signature:  # a thinking block's closing signature: no text to mend
                return item
            text = self.reasoning.feed(item.text)
            return (ReasoningChunk(text) if text is not item.text else item) if text else None
        if isinstance(item, ToolCallChunk):
            joiner = self.calls.setdefault(item.index, SurrogateJoiner())
            arguments = joiner.feed(item.arguments)
            call_id = mend(item.id) if item.id else item.id
            name = mend(item.name) if item.name else item.name
            if (call_id, name, arguments) == (item.id, item.name, item.arguments):
                return item
            if not (call_id or name or arguments):
                return None
            return ToolCallChunk(item.index, call_id, name, arguments)
        return item

    def flush(self) -> list[StreamItem]:
        """A U+FFFD for each channel that ended on a high surrogate."""
        out: list[StreamItem] = []
        if tail := self.reasoning.flush():
            out.append(ReasoningChunk(tail))
        if tail := self.text.flush():
            out.append(TextChunk(tail))
        for index, joiner in self.calls.items():
            if tail := joiner.flush():
                out.append(ToolCallChunk(index, arguments=tail))
        return out


async def valid_stream(items: AsyncIterator[StreamItem]) -> AsyncIterator[StreamItem]:
    """`items` (a provider's stream) with every string valid Unicode, as described above.

    What a channel holds back is released as U+FFFD before `StreamEnd`, or when
    the stream ends without one.
    """
    channels = _Channels()
    try:
        async for item in items:
            if isinstance(item, StreamEnd):
                for tail in channels.flush():
                    yield tail
            mended = channels.mend(item)
            if mended is not None:
                yield mended
        for tail in channels.flush():
            yield tail
    finally:
        if isinstance(items, AsyncGenerator):  # closed now, as if read directly
            await items.aclose()
