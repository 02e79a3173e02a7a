"""A driving process serves each conversation it drives on a socket of its own, so a
second terminal (`bastion attach ID`) can follow and act on it through the one
protocol (runtime.model.protocol), as a client of the same harness.

The socket is `<home>/sockets/<conversation id>.sock`, or, when that path is too long
for a socket (108 bytes), `$XDG_RUNTIME_DIR/bastion-<uid>/<hash of home>/…` (or under
the temp dir). Its folder is 0700, the socket 0600, and a connection is served only
when its peer is a process of this user that bastion did not start for a command and
its hello carries the socket's token (runtime.ipc.peer); the sandbox hides these
folders from commands besides (docs/trust-boundary.md).

While the app's harness process is parked (tui.parking) the app holds the socket
(runtime.ipc.door); the harness process it starts again adopts that listening socket
and its token (`Listener.adopt`) and leaves path and token to the app when it stops.

`Listeners` is what `Harness.serving` holds: the harness starts a listener when it
starts driving a conversation and stops it when it lets the conversation go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Any

from runtime.harness import Harness
from runtime.ipc.channel import DEFAULT_LIMIT
from runtime.ipc.door import MAX_PATH, SocketUnsafe, private_dir, socket_path
from runtime.ipc.peer import PeerRefused, TokenFile, check_ancestry, peer_identity, token_matches
from runtime.ipc.server import serve
from runtime.ipc.wire import Connection
from runtime.model.protocol import MAX_LINE, encode_error

__all__ = [
    "MAX_PATH",
    "Listener",
    "Listeners",
    "PeerRefused",
    "SocketUnsafe",
    "check_peer",
    "peer_uid",
    "private_dir",
    "socket_path",
]

log = logging.getLogger(__name__)

# --- who is on the other end -----------------------------------------------------


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where the
    platform cannot tell; the 0700 directory is then the only guard)."""
    _pid, uid, pidfd = peer_identity(sock)
    if pidfd is not None:
        os.close(pidfd)
    return uid


def check_peer(uid: int | None, own: int | None = None) -> None:
    """Refuse a peer of another user (PeerRefused)."""
    own = os.getuid() if own is None else own
    if uid is not None and uid != own:
        raise PeerRefused(
            f"a process of uid {uid} tried to attach; only uid {own} may",
            hint="attach as the user who runs the session",
        )


# --- the listener ------------------------------------------------------------------


class Listener:
    """One driven conversation served on its socket, on the harness's loop."""

    def __init__(self, harness: Harness, conversation_id: str) -> None:
        self.harness = harness
        self.conversation_id = conversation_id
        self.path = socket_path(harness.home, conversation_id)
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None
        self._token = TokenFile(self.path)
        self._clients: set[asyncio.Task[None]] = set()
        self._connections: set[Connection] = set()
        self.limit = DEFAULT_LIMIT  # events held for a client that does not read

    @property
    def clients(self) -> int:
        return len(self._connections)

    @property
    def token(self) -> str:
        return self._token.token

    async def adopt(self, fd: int, token: str) -> None:
        """Serve the listening socket the app holds at this path while parked (its
        `Door`, inherited as `fd`) with its token; closing leaves path and token to it."""
        self._token.token = token
        sock = socket.socket(fileno=fd)
        self._server = await asyncio.start_unix_server(self._client, sock=sock, limit=MAX_LINE)
        self._identity = None  # (the path is the app's: never unlinked here)

    async def start(self) -> None:
        private_dir(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            # A socket left by a crashed driver. Only the lease holder serves, so a
            # live one here belongs to a process that lost its lease: the newest wins.
            os.unlink(self.path)
        self._token.write()  # before the socket: a client that finds it finds the token
        self._server = await asyncio.start_unix_server(
            self._client, path=str(self.path), limit=MAX_LINE
        )
        os.chmod(self.path, 0o600)  # the 0700 directory guards it until now
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)

    async def close(self, *, keep: bool = False) -> None:
        """Stop serving; `keep`: leave the socket's path and token file (the app binds
        that path itself as this process parks: runtime.ipc.door)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if keep:
            self._identity = None
        else:
            self._token.remove()
        for conn in list(self._connections):
            conn.abort()  # dropped, not flushed: a client that stopped reading holds nothing
        await asyncio.gather(*self._clients, return_exceptions=True)
        if self._identity is None:
            return  # (an adopted socket: the app's door)
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:  # not a newer driver's socket
                os.unlink(self.path)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        conn = Connection(reader, writer)
        self._connections.add(conn)
        try:
            try:
                self._check(writer.get_extra_info("socket"))
            except PeerRefused as exc:
                log.warning("attach socket of %s: %s", self.conversation_id, exc)
                with contextlib.suppress(ConnectionError, OSError):
                    await conn.send({"hello": None, "error": encode_error(exc)})
                return
            await serve(self.harness, conn, authenticate=self._authenticate, limit=self.limit)
        except (ConnectionError, OSError):
            pass  # the client went away: nothing of the conversation depends on it
        finally:
            self._clients.discard(task)
            self._connections.discard(conn)
            await conn.close()

    def _check(self, sock: Any) -> None:
        """The peer's uid and ancestry (runtime.ipc.peer); PeerRefused if either fails."""
        from tools.lifetime import SCRIPT

        pid, uid, pidfd = peer_identity(sock)
        try:
            check_peer(uid)
            check_ancestry(pid, pidfd, SCRIPT, os.getpid())
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _authenticate(self, hello: dict[str, Any]) -> None:
        if not token_matches(hello.get("token"), self._token.token):
            raise PeerRefused(
                "the client did not give the session's token",
                hint="attach with `bastion attach ID` as the user who runs the session",
            )


class Listeners:
    """`Harness.serving`: a `Listener` for each conversation the harness drives. A socket
    that cannot be made (a path not ours, no room) is a warning in the log: driving goes
    on without it, and attach then says no process serves the session."""

    def __init__(self, harness: Harness, door: tuple[str, int, str] | None = None) -> None:
        self.harness = harness
        self._listeners: dict[str, Listener] = {}
        #: The app's door (conversation id, inherited listening fd, token): what this
        #: process serves that conversation on, rather than a socket of its own.
        self.door = door

    async def start(self, conversation_id: str) -> None:
        if conversation_id in self._listeners:
            return
        listener = Listener(self.harness, conversation_id)
        door, self.door = (
            (self.door, None)
            if self.door and self.door[0] == conversation_id
            else (None, self.door)
        )
        try:
            if door is not None:
                await listener.adopt(door[1], door[2])
            else:
                await listener.start()
        except (OSError, SocketUnsafe) as exc:
            log.warning("cannot serve %s at %s: %s", conversation_id, listener.path, exc)
            return
        self._listeners[conversation_id] = listener

    async def stop(self, conversation_id: str, *, keep: bool = False) -> None:
        listener = self._listeners.pop(conversation_id, None)
        if listener is not None:
            await listener.close(keep=keep)

    async def close(self) -> None:
        for conversation_id in list(self._listeners):
            await self.stop(conversation_id)

    def listener(self, conversation_id: str) -> Listener | None:
        return self._listeners.get(conversation_id)

    def clients(self, conversation_id: str) -> int:
        listener = self._listeners.get(conversation_id)
        return listener.clients if listener is not None else 0

    def token(self, conversation_id: str) -> str | None:
        listener = self._listeners.get(conversation_id)
        return listener.token if listener is not None else None
