"""Attach: a live view of a conversation another process drives, and a way to act on it.

    follower = Follower(harness, conversation_id)     # harness: this process's own
    async for view in follower.views():               # the same reducer over the same events
        render(view)                                  # follower.source: "socket" or "ledger"
    await follower.submit("also run the tests", InboxMode.FOLLOW_UP)
    await follower.interrupt(); await follower.respond(call_id, True)

While the driving process serves the conversation (`runtime.ipc.serve`), the view comes
from its socket: a snapshot with what it streamed so far, then every event, deltas
included. When the socket is gone (the driver exited or crashed) the follower reads
the ledger every `poll` seconds instead, and tries the socket again each time, so a
new driver is picked up as soon as it serves.

Requests go to the driving process over the socket, which applies them through its
own Harness: its driver is woken at once and the answer (or the typed error of an
answer that lost a race) comes back. With no driver serving, they are applied here,
through this process's Harness: the same store transitions, which whichever process
drives the conversation next (or polls it now) takes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

from runtime.harness import Harness
from runtime.ipc.serve import CLIENT_LIMIT, PROTOCOL, decode_event, socket_path, view_from_wire
from runtime.model.errors import BastionError
from runtime.model.ids import uuid7
from runtime.model.records import InboxItem, InboxMode
from runtime.model.results import Interruption, Redirection
from runtime.model.rules import Rule
from runtime.model.views import ConversationView, reduce

__all__ = ["AttachClient", "Detached", "Follower", "RemoteError"]

log = logging.getLogger(__name__)


class RemoteError(BastionError):
    """The driving process refused a request; `code` is the error's own code there."""

    def __init__(self, code: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


class Detached(BastionError):
    """The driving process went away before it answered."""

    code = "detached"


class AttachClient:
    """One connection to a driving process's socket: messages in, requests out.

    At most `limit` messages wait here for the consumer; past that the client stops
    reading the socket, so a consumer that falls behind holds the driver's queue for
    this client, which sends a snapshot in place of what it dropped (`serve`), rather
    than growing this one without end.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        hello: dict[str, Any],
        *,
        limit: int = CLIENT_LIMIT,
    ) -> None:
        self.pid = int(hello["pid"])
        self.view = view_from_wire(hello["view"])
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(limit)
        self._ended = False  # the socket's end was read (its None may not fit the queue)
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, path: Path) -> AttachClient | None:
        """Connect and read the hello; None if nothing (or a dead socket) is there."""
        from runtime.ipc.peer import read_token

        token = read_token(path)
        if token is None:
            return None  # no server (or one that is stopping): follow the ledger
        try:
            reader, writer = await asyncio.open_unix_connection(str(path), limit=READ_LIMIT)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        try:
            writer.write(json.dumps({"op": "hello", "token": token}).encode() + b"\n")
            await writer.drain()
            first = await read_line(reader)
            if not first.endswith(b"\n"):  # (or empty) the driver closed as we came
                writer.close()
                return None
            hello = json.loads(first)
            if hello is not None and hello.get("type") == "reply" and not hello.get("ok"):
                raise _remote_error(hello["error"])
            if hello is None or hello.get("type") != "hello":
                writer.close()
                return None  # the driver closed as we came (it is stopping)
            if hello.get("protocol") != PROTOCOL:
                raise BastionError(
                    f"the driving process speaks attach protocol {hello.get('protocol')}, "
                    f"this one {PROTOCOL}",
                    hint="attach with the same bastion version that drives the session",
                )
            return cls(reader, writer, hello)
        except (ConnectionError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # A hello cut short by a driver killed mid-line, or one this cannot read:
            # no socket to follow, so the follower reads the ledger.
            log.info("no usable hello on %s: %s", path, exc)
            writer.close()
            return None
        except BaseException:
            writer.close()
            raise

    async def _read(self) -> None:
        try:
            while raw := await read_line(self._reader):
                message = json.loads(raw)
                if message.get("type") == "reply":
                    future = self._replies.pop(message.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(message)
                else:
                    await self._messages.put(message)  # waits while `limit` are queued
        except (ConnectionError, ValueError):
            pass  # a driver killed mid-line: the same as its end
        finally:
            self._ended = True
            with contextlib.suppress(asyncio.QueueFull):  # then `messages` sees `_ended`
                self._messages.put_nowait(None)
            for future in self._replies.values():
                if not future.done():
                    future.set_exception(
                        Detached(
                            "the driving process went away before it answered",
                            hint="look at the conversation and try again",
                        )
                    )
            self._replies.clear()

    async def messages(self) -> list[dict[str, Any]] | None:
        """The next messages (everything queued, at least one); None once the driver is gone."""
        if self._ended and self._messages.empty():
            return None
        first = await self._messages.get()
        if first is None:
            return None
        out = [first]
        while not self._messages.empty():
            message = self._messages.get_nowait()
            if message is None:
                self._messages.put_nowait(None)
                break
            out.append(message)
        return out

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its reply; a refusal raises RemoteError."""
        if self._task.done():
            raise Detached("the driving process is gone", hint="try again")
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[request_id] = future
        payload = {"op": op, "id": request_id, **fields}
        self._writer.write(json.dumps(payload, ensure_ascii=False).encode() + b"\n")
        try:
            await self._writer.drain()
        except ConnectionError:
            self._replies.pop(request_id, None)
            raise Detached("the driving process is gone", hint="try again") from None
        reply = await future
        if not reply.get("ok"):
            raise _remote_error(reply["error"])
        return reply

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


#: Bytes the socket's reader buffers ahead (it stops reading past twice this): small, so a
#: consumer that falls behind holds the driver back, which then resyncs it.
READ_LIMIT = 1 << 20
#: The longest line taken (joined deltas and snapshots of long sessions are long).
MAX_LINE = 1 << 26


async def read_line(reader: asyncio.StreamReader) -> bytes:
    """The next line, however much longer than the reader's buffer limit it is (up to
    MAX_LINE; ValueError past that); at the end, what is left, without a newline."""
    parts: list[bytes] = []
    size = 0
    while True:
        try:
            return b"".join([*parts, await reader.readuntil(b"\n")])
        except asyncio.IncompleteReadError as exc:
            return b"".join([*parts, exc.partial])
        except asyncio.LimitOverrunError as exc:  # no newline within the limit yet
            try:
                part = await reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError as cut:
                return b"".join([*parts, cut.partial])
        size += len(part)
        if size > MAX_LINE:
            raise ValueError(f"a line of more than {MAX_LINE} bytes")
        parts.append(part)


def _remote_error(error: dict[str, Any]) -> RemoteError:
    return RemoteError(str(error.get("code")), str(error.get("message")), hint=error.get("hint"))


class Follower:
    """Keeps a view of `conversation_id` current and sends what the user does to its driver."""

    def __init__(self, harness: Harness, conversation_id: str, *, poll: float = 0.2) -> None:
        self.harness = harness
        self.conversation_id = conversation_id
        self.poll = poll
        self.path = socket_path(harness.home, conversation_id)
        self.view: ConversationView | None = None
        self.source = "ledger"  # where the view comes from now: "socket" or "ledger"
        self.driver_pid: int | None = None  # the process serving it, while "socket"
        self._client: AttachClient | None = None

    async def views(self) -> AsyncGenerator[ConversationView, None]:
        """The view now, then after every change, for as long as it is iterated."""
        self.view = await self.harness.snapshot(self.conversation_id)
        yield self.view
        try:
            while True:
                client = await AttachClient.connect(self.path)
                if client is not None:
                    async for view in self._over_socket(client):
                        yield view
                    continue  # try the socket again at once: a resync, or a new driver
                self.source, self.driver_pid = "ledger", None
                if await self._poll_ledger():
                    yield self._current
                await asyncio.sleep(self.poll)
        finally:
            client, self._client = self._client, None
            if client is not None:
                await client.close()

    @property
    def _current(self) -> ConversationView:
        assert self.view is not None
        return self.view

    async def _over_socket(self, client: AttachClient) -> AsyncIterator[ConversationView]:
        self._client, self.source, self.driver_pid = client, "socket", client.pid
        try:
            self.view = client.view
            yield self.view
            while (batch := await client.messages()) is not None:
                view = self._current
                for message in batch:
                    if message.get("type") == "snapshot":
                        view = view_from_wire(message["view"])
                    elif message.get("type") == "event":
                        view = reduce(view, decode_event(message["event"]))
                if view.resync_required:
                    return  # the views() loop reconnects: a fresh snapshot
                if view is not self.view:
                    self.view = view
                    yield view
        finally:
            self._client = None
            await client.close()

    async def _poll_ledger(self) -> bool:
        """One round of following the ledger; true if the view changed."""
        before = view = self._current
        for event in await self.harness.ledger(self.conversation_id, after=view.version):
            view = reduce(view, event)
        if view.resync_required:
            view = await self.harness.snapshot(self.conversation_id)
        self.view = view
        return view is not before

    # --- acting -------------------------------------------------------------

    async def submit(self, text: str, mode: InboxMode = InboxMode.PROMPT) -> InboxItem:
        """Send input: a prompt (idle), a steer or a follow-up. Admitted once even if the
        driver goes away mid-request (a request key, then the store directly)."""
        key = f"attach-{uuid7()}"
        client = self._client
        if client is not None:
            try:
                reply = await client.request("submit", text=text, mode=str(mode), request_key=key)
                return InboxItem.from_dict(reply["item"])
            except Detached:
                pass
        return await self.harness.submit(self.conversation_id, text, mode=mode, request_key=key)

    async def interrupt(self) -> Interruption:
        client = self._client
        if client is not None:
            try:
                reply = await client.request("interrupt")
                withdrawn = tuple(InboxItem.from_dict(i) for i in reply["withdrawn"])
                return Interruption(reply["run_id"], withdrawn)
            except Detached:
                pass  # asking twice is harmless: the second finds nothing to interrupt
        return await self.harness.interrupt(self.conversation_id)

    async def redirect(self, text: str) -> Redirection:
        """Interrupt and send `text` as the next prompt, in one step (Harness.redirect)."""
        key = f"attach-{uuid7()}"
        client = self._client
        if client is not None:
            try:
                reply = await client.request("redirect", text=text, request_key=key)
                withdrawn = tuple(InboxItem.from_dict(i) for i in reply["withdrawn"])
                return Redirection(reply["run_id"], withdrawn, InboxItem.from_dict(reply["item"]))
            except Detached:
                pass  # the store decides: the driver's watcher sees the interrupt
        return await self.harness.redirect(self.conversation_id, text, request_key=key)

    async def cancel_compaction(self) -> bool:
        """Ask the driving process to stop its run's compaction (False: none, or detached)."""
        client = self._client
        if client is None:
            return False
        try:
            reply = await client.request("cancel_compaction")
        except Detached:
            return False
        return bool(reply.get("cancelled"))

    async def respond(
        self,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> tuple[Rule, ...]:
        """Answer an approval (`always`: save the rule "a" proposes, session or project;
        `message`: a denial's words for the model; `sandbox`: "outside" or "network",
        this call only), through the driver when it serves; the rules saved."""
        client = self._client
        if client is not None:
            reply = await client.request(
                "respond",
                tool_call_id=tool_call_id,
                approve=approve,
                always=always,
                message=message,
                sandbox=sandbox,
            )
            return tuple(Rule.from_dict(rule) for rule in reply.get("saved", ()))
        return await self.harness.respond(
            self.conversation_id,
            tool_call_id,
            approve,
            always=always,
            message=message,
            sandbox=sandbox,
        )

    async def withdraw(self, item_id: str) -> bool:
        client = self._client
        if client is not None:
            reply = await client.request("withdraw", item_id=item_id)
            return bool(reply["withdrawn"])
        return await self.harness.withdraw(self.conversation_id, item_id)
