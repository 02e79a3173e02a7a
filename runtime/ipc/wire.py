"""The protocol's one transport: JSON objects, one per line, over a stream socket.

The same for every connection: the app's socket pair to its harness process, a
session's attach socket, and the socket pair print mode and `--plain` hold to the
harness in their own process. A line longer than MAX_LINE, or one that is not a JSON
object, is a `ProtocolError` for that line; the connection goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from typing import Any

from runtime.model.protocol import MAX_LINE, ProtocolError, line

__all__ = ["Connection", "connect_pair"]


class Connection:
    """One end of a connection: `send` a message, `receive` the next (None at its end)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._lock = asyncio.Lock()

    @classmethod
    async def over(cls, sock: socket.socket) -> Connection:
        reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_LINE)
        return cls(reader, writer)

    @classmethod
    async def unix(cls, path: str) -> Connection:
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE)
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_many((message,))

    async def send_many(self, messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> None:
        data = b"".join(line(m) for m in messages)
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; None at end of file. ProtocolError for a line that is too
        long or not a JSON object (the rest of the stream is still read)."""
        try:
            raw = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial.strip():
                return None
            raw = exc.partial
        except asyncio.LimitOverrunError:
            await self._skip_line()
            raise ProtocolError(f"a message longer than {MAX_LINE} bytes") from None
        except (ConnectionError, OSError):
            return None
        try:
            message = json.loads(raw)
        except ValueError:
            raise ProtocolError("a line that is not JSON") from None
        if not isinstance(message, dict):
            raise ProtocolError("a message that is not a JSON object")
        return message

    async def _skip_line(self) -> None:
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return

    def abort(self) -> None:
        self.writer.transport.abort()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def connect_pair() -> tuple[Connection, Connection]:
    """Two connected ends in this process (print mode, `--plain`, tests): the harness
    serves one, the front end holds the other; the same transport as between
    processes."""
    ours, theirs = socket.socketpair()
    return await Connection.over(ours), await Connection.over(theirs)
