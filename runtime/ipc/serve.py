"""The driving process serves its conversation's events on a local socket, for `bastion attach`.

Every process that drives a conversation (holds its lease) listens on a Unix socket
beside the store, `<home>/sockets/<conversation id>.sock`, or, when that path is too
long for a socket (108 bytes), `$XDG_RUNTIME_DIR/bastion-<uid>/<hash of home>/…` (or
under the temp dir). The directory is 0700, the socket 0600, and a peer is refused
before it sees anything unless it is a process of ours that bastion did not start
for a command and it gives the socket's token (runtime.ipc.peer: the token is in a
0600 file beside the socket, which the sandbox hides from commands).

The protocol is JSON lines, both ways:

    client → {"op": "hello", "token": T}                first, within AUTH_TIMEOUT
    server → {"type": "hello", "protocol": 1, "pid": P, "view": VIEW}
    server → {"type": "event", "event": EVENT}         durable or transient, in order
    server → {"type": "snapshot", "view": VIEW}         after this client fell behind
    client → {"op": "submit", "id": N, "text": T, "mode": "prompt"|"steer"|"follow_up"}
             {"op": "withdraw", "id": N, "item_id": I}
             {"op": "interrupt", "id": N}
             {"op": "redirect", "id": N, "text": T, "request_key": K}
                                        interrupt, and T the next prompt (K: once)
             {"op": "cancel_compaction", "id": N}
             {"op": "respond", "id": N, "tool_call_id": C, "approve": true|false,
              "always": null|"session"|"project", "message": null|TEXT,
              "sandbox": null|"outside"|"network"}
    server → {"type": "reply", "id": N, "ok": true, ...}
             {"type": "reply", "id": N, "ok": false, "error": {"code", "message", "hint"}}

A new client is subscribed before its snapshot is taken (`Harness.snapshot`, with
what this process streamed but has not checkpointed, and the stream cursors), so
the reducer on the other side (`runtime.model.views.reduce`) goes on from the snapshot
with the next delta. Each client's events wait in its own bounded, coalescing
`EventChannel`; the harness only ever appends to it. A client that falls `limit`
items behind gets a fresh snapshot in place of what it missed, never a slower
harness.

Requests are applied by this process through the same Harness calls a front end
of its own would make (submit, withdraw, interrupt, respond), so the driver is
woken at once, and an answer that loses a race gets the same typed error, sent
back as one message.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from runtime.ipc.channel import RESYNC, EventChannel, pump
from runtime.ipc.peer import PeerRefused, TokenFile, check_ancestry, peer_identity, token_matches
from runtime.model.errors import BastionError
from runtime.model.events import event_from_dict, event_to_dict
from runtime.model.records import Conversation, Entry, InboxItem, InboxMode, Run, ToolCallRecord
from runtime.model.todo import TodoItem
from runtime.model.views import (
    ConversationView,
    LiveText,
    ReasoningDeltas,
    StreamCursor,
    TextDeltas,
    ViewEvent,
)

__all__ = [
    "PROTOCOL",
    "AttachServer",
    "PeerRefused",
    "SocketUnsafe",
    "check_peer",
    "decode_event",
    "encode_event",
    "peer_uid",
    "socket_path",
    "view_from_wire",
    "view_to_wire",
]

log = logging.getLogger(__name__)

PROTOCOL: Final = 1
MAX_PATH: Final = 107  # bytes of a Unix socket path (sun_path is 108, NUL included)
MAX_LINE: Final = 1 << 20  # bytes of one request line
AUTH_TIMEOUT: Final = 10.0  # seconds a new client has to send its token
CLIENT_LIMIT: Final = 2048  # events queued for one client before it is resynced


class SocketUnsafe(BastionError):
    """The socket's directory is not private to this user (another owner, open mode)."""

    code = "socket_unsafe"


class BadRequest(BastionError):
    code = "bad_request"


# --- where the socket lives ------------------------------------------------------


def socket_path(home: Path, conversation_id: str) -> Path:
    """The socket of `conversation_id` for the store in `home` (the same in every process)."""
    preferred = home.absolute() / "sockets" / f"{conversation_id}.sock"
    if len(os.fsencode(preferred)) <= MAX_PATH:
        return preferred
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(os.fsencode(home.absolute())).hexdigest()[:16]
    short = Path(base) / f"bastion-{os.getuid()}" / digest / f"{conversation_id}.sock"
    if len(os.fsencode(short)) <= MAX_PATH:
        return short
    return Path("/tmp") / f"bastion-{os.getuid()}" / digest / f"{conversation_id}.sock"


def private_dir(path: Path) -> None:
    """Make `path` (and missing parents) a directory only this user can enter: created
    0700, or an existing one checked (ours, not a symlink) and tightened to 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for directory in (path, path.parent) if path.parent.name.startswith("bastion-") else (path,):
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise SocketUnsafe(
                f"{directory} is not a directory of this user",
                hint="remove it (or set XDG_RUNTIME_DIR to a private directory) and start again",
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(directory, 0o700)


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


# --- the wire form of views and events -------------------------------------------


def view_to_wire(view: ConversationView) -> dict[str, Any]:
    return {
        "conversation": view.conversation.to_dict(),
        "version": view.version,
        "entries": [e.to_dict() for e in view.entries],
        "runs": [r.to_dict() for r in view.runs],
        "inbox": [i.to_dict() for i in view.inbox],
        "tool_calls": [c.to_dict() for c in view.tool_calls],
        "cursors": {k: [c.epoch, c.seq] for k, c in view.cursors.items()},
        "reasoning": {k: str(v) for k, v in view.reasoning.items()},
        "tool_output": dict(view.tool_output),
        "lease_pid": view.lease_pid,
        "todos": [t.to_dict() for t in view.todos],
    }


def view_from_wire(data: dict[str, Any]) -> ConversationView:
    return ConversationView(
        conversation=Conversation.from_dict(data["conversation"]),
        version=int(data["version"]),
        settled=tuple(Entry.from_dict(e) for e in data["entries"]),
        runs=tuple(Run.from_dict(r) for r in data["runs"]),
        inbox=tuple(InboxItem.from_dict(i) for i in data["inbox"]),
        tool_calls=tuple(ToolCallRecord.from_dict(c) for c in data["tool_calls"]),
        cursors=MappingProxyType(
            {k: StreamCursor(int(e), int(s)) for k, (e, s) in data["cursors"].items()}
        ),
        reasoning=MappingProxyType(
            {k: LiveText.of(v) for k, v in (data.get("reasoning") or {}).items()}
        ),
        tool_output=MappingProxyType(dict(data.get("tool_output") or {})),
        lease_pid=data.get("lease_pid"),
        todos=tuple(TodoItem.from_dict(t) for t in data.get("todos") or ()),
    )


def encode_event(event: ViewEvent) -> dict[str, Any]:
    if isinstance(event, TextDeltas | ReasoningDeltas):
        out: dict[str, Any] = {"type": event.type}
        out.update((name, getattr(event, name)) for name in event.__slots__)
        return out
    return event_to_dict(event)


def decode_event(data: dict[str, Any]) -> ViewEvent:
    if data.get("type") == TextDeltas.type:
        return TextDeltas(**{name: data[name] for name in TextDeltas.__slots__})
    if data.get("type") == ReasoningDeltas.type:
        return ReasoningDeltas(**{name: data[name] for name in ReasoningDeltas.__slots__})
    return event_from_dict(data)


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def error_reply(request_id: Any, exc: BastionError) -> dict[str, Any]:
    error = {"code": exc.code, "message": exc.message, "hint": exc.hint}
    return {"type": "reply", "id": request_id, "ok": False, "error": error}


# --- the server --------------------------------------------------------------------


class AttachServer:
    """Serves one driven conversation of `harness` on its socket, on the harness's loop."""

    def __init__(self, harness: Any, conversation_id: str, *, limit: int = CLIENT_LIMIT) -> None:
        self.harness = harness
        self.conversation_id = conversation_id
        self.path = socket_path(harness.home, conversation_id)
        self.limit = limit
        self.resyncs = 0  # snapshots sent in place of events a client fell behind on
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None
        self._token = TokenFile(self.path)
        self._clients: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

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

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self._token.remove()
        for writer in self._clients.values():
            # Dropped, not flushed: a client that stopped reading must not hold up a close.
            writer.transport.abort()
        await asyncio.gather(*self._clients, return_exceptions=True)
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:  # not a newer driver's socket
                os.unlink(self.path)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients[task] = writer
        try:
            try:
                await self._authenticate(reader, writer)
            except PeerRefused as exc:
                log.warning("attach socket of %s: %s", self.conversation_id, exc)
                writer.write(line(error_reply(None, exc)))
                return
            await self._session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing of the conversation depends on it
        finally:
            self._clients.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The peer's uid, ancestry and token (runtime.ipc.peer); PeerRefused if any fails."""
        from tools.lifetime import SCRIPT

        pid, uid, pidfd = peer_identity(writer.get_extra_info("socket"))
        try:
            check_peer(uid)
            check_ancestry(pid, pidfd, SCRIPT, os.getpid())
        finally:
            if pidfd is not None:
                os.close(pidfd)
        try:
            first = await asyncio.wait_for(reader.readline(), AUTH_TIMEOUT)
            hello = json.loads(first)
            given = hello.get("token") if isinstance(hello, dict) else None
        except (TimeoutError, ValueError):
            given = None
        if not token_matches(given, self._token.token):
            raise PeerRefused(
                "the client did not give the session's token",
                hint="attach with `bastion attach ID` as the user who runs the session",
            )

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = EventChannel(self.limit)
        sub = self.harness.subscribe(self.conversation_id)
        pumping = asyncio.create_task(pump(sub, channel))
        sending: asyncio.Task[None] | None = None
        try:
            view = await self.harness.snapshot(self.conversation_id)
            writer.write(
                line(
                    {
                        "type": "hello",
                        "protocol": PROTOCOL,
                        "pid": os.getpid(),
                        "view": view_to_wire(view),
                    }
                )
            )
            await writer.drain()
            sending = asyncio.create_task(self._send(channel, writer))
            while request := await reader.readline():
                writer.write(line(await self._apply(request)))
                await writer.drain()
        finally:
            sub.close()
            channel.close()
            if sending is not None:
                sending.cancel()
            tasks = [pumping, *(t for t in (sending,) if t)]
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception) and not isinstance(outcome, ConnectionError):
                    log.error("attach client of %s", self.conversation_id, exc_info=outcome)

    async def _send(self, channel: EventChannel, writer: asyncio.StreamWriter) -> None:
        while (batch := await channel.get()) is not None:
            if batch is RESYNC:
                self.resyncs += 1
                view = await self.harness.snapshot(self.conversation_id)
                writer.write(line({"type": "snapshot", "view": view_to_wire(view)}))
            else:
                assert isinstance(batch, list)
                writer.write(
                    b"".join(line({"type": "event", "event": encode_event(e)}) for e in batch)
                )
            await writer.drain()

    async def _apply(self, raw: bytes) -> dict[str, Any]:
        request_id: Any = None
        try:
            try:
                request = json.loads(raw)
                request_id = request.get("id")
                op = request["op"]
            except (ValueError, AttributeError, KeyError, TypeError):
                raise BadRequest(
                    "the request is not a JSON object with an op",
                    hint='send one JSON object per line: {"op": ..., "id": ...}',
                ) from None
            result = await self._dispatch(op, request)
        except BastionError as exc:
            return error_reply(request_id, exc)
        return {"type": "reply", "id": request_id, "ok": True, **result}

    async def _dispatch(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        conv_id = self.conversation_id
        try:
            if op == "submit":
                mode = InboxMode(request.get("mode", InboxMode.PROMPT))
                key = request.get("request_key")
                item = await self.harness.submit(
                    conv_id, str(request["text"]), mode=mode, request_key=key and str(key)
                )
                return {"item": item.to_dict()}
            if op == "withdraw":
                return {"withdrawn": await self.harness.withdraw(conv_id, str(request["item_id"]))}
            if op == "interrupt":
                done = await self.harness.interrupt(conv_id)
                return {"run_id": done.run_id, "withdrawn": [i.to_dict() for i in done.withdrawn]}
            if op == "redirect":
                key = request.get("request_key")
                cut = await self.harness.redirect(
                    conv_id, str(request["text"]), request_key=key and str(key)
                )
                withdrawn = [i.to_dict() for i in cut.withdrawn]
                return {"run_id": cut.run_id, "withdrawn": withdrawn, "item": cut.item.to_dict()}
            if op == "cancel_compaction":
                return {"cancelled": await self.harness.cancel_compaction(conv_id)}
            if op == "respond":
                call_id, approve = str(request["tool_call_id"]), request["approve"]
                always, message = request.get("always"), request.get("message")
                sandbox = request.get("sandbox")
                if sandbox is not None and not isinstance(sandbox, str):
                    raise ValueError("sandbox")
                if not isinstance(approve, bool):
                    raise ValueError("approve")
                if always is not None and always not in ("session", "project"):
                    raise ValueError("always")
                if message is not None and not isinstance(message, str):
                    raise ValueError("message")
                saved = await self.harness.respond(
                    conv_id, call_id, approve, always=always, message=message, sandbox=sandbox
                )
                return {
                    "rules": [rule.pattern for rule in saved],
                    "saved": [rule.to_dict() for rule in saved],
                }
        except (KeyError, ValueError) as exc:
            raise BadRequest(
                f"request {op!r} is missing or has a bad field: {exc}",
                hint="see runtime/ipc/serve.py for the fields of each request",
            ) from None
        raise BadRequest(
            f"unknown request {op!r}",
            hint="send submit, withdraw, interrupt, redirect, cancel_compaction or respond",
        )


async def start_server(harness: Any, conversation_id: str) -> AttachServer | None:
    """Serve `conversation_id` for attach; None (and a warning in the log) if the socket
    cannot be made: driving goes on without it, and attach follows the ledger."""
    server = AttachServer(harness, conversation_id)
    try:
        await server.start()
    except (OSError, SocketUnsafe) as exc:
        log.warning("cannot serve %s for attach at %s: %s", conversation_id, server.path, exc)
        return None
    return server
