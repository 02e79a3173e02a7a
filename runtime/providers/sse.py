"""Server-sent events, parsed incrementally from bytes.

`SSEDecoder.feed(chunk)` takes whatever a network read produced and returns the
events completed by it; `SSEDecoder.close()` returns a final event that was not
followed by a blank line. Lines end at CR, LF or CRLF and nowhere else: the
decoder works on bytes, so U+2028, U+2029 and NEL inside a UTF-8 payload are
ordinary characters, never line breaks (a `str.splitlines()` based parser cuts
such payloads in half). A CR that ends one chunk and the LF that starts the
next are one line break.

The decoder follows the WHATWG event-stream rules: `data:` lines of one event
are joined with "\\n", `event:` names it, `id:` sets the last event id (kept
across events), `retry:` takes digits only, a line starting with ":" is a
comment, one space after the colon is dropped, a field without a colon has an
empty value, and a blank line dispatches the event unless it carried no data.
The one deliberate difference: `close()` dispatches a final unterminated event
instead of discarding it, because some servers end the stream that way.
"""

from __future__ import annotations

import msgspec

__all__ = ["DataBatch", "SSEDecoder", "ServerSentEvent", "parse_sse"]


class ServerSentEvent(msgspec.Struct, frozen=True):
    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


_BOM = b"\xef\xbb\xbf"
_SEPARATOR = b"\n\ndata: "


class DataBatch(msgspec.Struct, frozen=True):
    """Consecutive events that were each exactly one `data: ` line and nothing else.

    `raw` is their payloads separated by b"\\n\\ndata: " (the stream as it was,
    minus the first "data: " and the last blank line); `count` is how many.
    """

    raw: bytes
    count: int

    def payloads(self) -> list[bytes]:
        return self.raw.split(_SEPARATOR)

    def json_array(self) -> bytes:
        """The payloads as one JSON array text (valid when each payload is JSON)."""
        return b"[" + self.raw.replace(_SEPARATOR, b",") + b"]"

    def without_last(self) -> DataBatch | None:
        cut = self.raw.rfind(_SEPARATOR)
        return None if cut == -1 else DataBatch(self.raw[:cut], self.count - 1)

    def last(self) -> bytes:
        cut = self.raw.rfind(_SEPARATOR)
        return self.raw if cut == -1 else self.raw[cut + len(_SEPARATOR) :]


class SSEDecoder:
    """Incremental event-stream parser. Not thread-safe; one per response."""

    __slots__ = (
        "_data",
        "_event",
        "_last_id",
        "_partial",
        "_pending",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # pieces of a line not yet terminated
        self._pending = b""  # an unfinished event held back by `feed_batch`
        self._skip_lf = False  # the previous chunk ended in CR
        self._started = False  # a leading BOM has been dealt with
        self._data: list[bytes] = []
        self._event = b""
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    def feed_batch(self, chunk: bytes) -> DataBatch | list[ServerSentEvent]:
        """Like `feed`, with a fast path for the common shape of streaming APIs.

        When every event the chunk completes is a single `data: ` line (what
        OpenAI-compatible servers send), the payloads come back as one
        `DataBatch` without building an event object per event; otherwise this
        falls back to `feed` and returns the events. Never mix `feed` and
        `feed_batch` calls on one decoder.
        """
        if self._pending:
            chunk = self._pending + chunk
            self._pending = b""
        if (
            self._started
            and not self._skip_lf
            and not self._partial
            and not self._data
            and not self._event
            and chunk.startswith(b"data: ")
            and b"\r" not in chunk
        ):
            end = chunk.rfind(b"\n\n")
            if end == -1:
                self._pending = chunk
                return []
            complete = chunk[:end]
            count = complete.count(_SEPARATOR) + 1
            # If every LF is part of a "\n\ndata: " separator, there are no other
            # lines: each event is exactly one `data: ` line and a blank line.
            if complete.count(b"\n") == 2 * (count - 1):
                self._pending = chunk[end + 2 :]
                return DataBatch(complete[6:], count)
        events = self.feed(chunk)
        if self._partial and not self._data and not self._event:
            # Between events again: hand the unfinished line back to the fast path.
            self._pending = b"".join(self._partial)
            self._partial.clear()
        return events

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Consume one chunk of the stream; return the events it completed."""
        if not chunk:
            return []
        if not self._started:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            # A CR at the very end may be the first half of a CRLF; it ends the
            # line either way, and a LF starting the next chunk is then dropped.
            self._skip_lf = chunk[-1] == 0x0D
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in chunk:
            self._partial.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial.clear()
        tail = lines.pop()
        if tail:
            self._partial.append(tail)
        return self._process(lines)

    def close(self) -> list[ServerSentEvent]:
        """End of stream: return a final event that had no terminating blank line."""
        lines: list[bytes] = []
        if self._pending:
            self._partial.append(self._pending)
            self._pending = b""
        if self._partial:
            lines.append(b"".join(self._partial))
            self._partial.clear()
        lines.append(b"")
        self._skip_lf = False
        return self._process(lines)

    def _strip_bom(self, chunk: bytes) -> bytes:
        pending = b"".join(self._partial) + chunk
        if len(pending) < len(_BOM) and _BOM.startswith(pending):
            self._partial = [pending]  # wait for more bytes to decide
            return b""
        self._started = True
        self._partial.clear()
        return pending[len(_BOM) :] if pending.startswith(_BOM) else pending

    def _process(self, lines: list[bytes]) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(self._dispatch())
                    data = self._data
                else:
                    self._event = b""
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line[0] != 0x3A:  # ":" starts a comment
                self._field(line)
        return events

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if b"\0" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        # any other field is ignored, as the specification says

    def _dispatch(self) -> ServerSentEvent:
        raw = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event = ServerSentEvent(
            raw.decode("utf-8", "replace"),
            self._event.decode("utf-8", "replace") if self._event else "message",
            self._last_id,
            self._retry,
        )
        self._data = []
        self._event = b""
        return event


def parse_sse(payload: bytes) -> list[ServerSentEvent]:
    """Parse a whole event stream at once (tests and small responses)."""
    decoder = SSEDecoder()
    return decoder.feed(payload) + decoder.close()
