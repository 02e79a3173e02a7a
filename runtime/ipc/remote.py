"""The harness in a child process, driven over a private socket pair.

A front end that draws (the Textual app) and a harness on a thread of the same
process share one interpreter lock: while a stream floods in, every key's echo
and every frame waits its turn behind the model loop, and the loop behind them.
So `bastion` runs the harness in a child process (`tui.child`, which opens and
drives the session the way every front end does) and holds a `RemoteHarness`:
the same methods as a `ThreadedHarness`, carried over one end of a
`socket.socketpair()`:

    harness = await RemoteHarness.connect(sock, process)   # the child opened and drove it
    channel = harness.subscribe(conversation_id)           # an EventChannel, as ever
    view = await harness.snapshot(conversation_id)
    await harness.submit(conversation_id, "hi")
    await harness.close()                                  # closes it there; the child exits

Frames are a 4-byte length and a pickle (`runtime.ipc.frames`). Both ends are this
program: the pair is unnamed and inherited by the child alone, so nothing another
process (or user) could connect to ever reads one.

    parent → child  ("call", id, method, args, kwargs)    a Harness coroutine method
                    ("subscribe", sub, conversation_id)    taken before the next frame is read
    child → parent  ("result", id, value) | ("error", id, exception)   (None for STAYS)
                    ("events", sub, batch)                 a batch from the child's EventChannel,
                                                           None for RESYNC
                    ("ended", sub)

Each subscription's events wait in an `EventChannel` in the child, which joins
deltas while the parent is slow to read and says RESYNC when it falls too far
behind; the harness never waits for the screen. An error is sent as itself when it
survives a pickle round trip, else as a `BastionError` with its message.

The child never outlives the parent: at end of file on its end of the pair (the
parent exited or was killed) it closes the harness (drivers stopped, their
commands ended, leases released) and exits. The parent sees the child's end of
file as `HarnessGone`: pending calls fail with it and every channel closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import subprocess
from typing import Any, Final

from runtime.ipc.channel import DEFAULT_LIMIT, RESYNC, EventChannel, HarnessProxy, pump
from runtime.ipc.frames import HarnessGone, frame, read_frame, sendable_error, write_frame

__all__ = ["HarnessGone", "RemoteHarness", "serve"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT: Final = 10.0  # seconds the child gets to close the harness and exit
#: Calls whose result is the harness's own (a Driver): the parent gets None.
STAYS: Final = frozenset({"drive"})
FIRST: Final = 0  # the subscription the child takes with the session (the parent's start at 1)


# --- the parent's side ------------------------------------------------------------


class RemoteHarness(HarnessProxy):
    """A `Harness` in a child process, seen from this one's loop (see the module)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: subprocess.Popen[bytes] | None,
        *,
        opening: tuple[str, Any, Any] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        self.process = process
        self.limit = limit
        self.gone: HarnessGone | None = None  # set once the child's end closed
        self._reader, self._writer = reader, writer
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._channels: dict[int, EventChannel] = {}
        self._opening = opening  # (conversation id, its settings, its view), until taken
        self._first_for: str | None = None  # FIRST's conversation, until subscribed to
        if opening is not None:  # the child's subscription FIRST: its events since the view
            self._channels[FIRST] = EventChannel(limit)
            self._first_for = opening[0]
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(
        cls,
        sock: socket.socket,
        process: subprocess.Popen[bytes] | None = None,
        *,
        opening: tuple[str, Any, Any] | None = None,
    ) -> RemoteHarness:
        """Over `sock`; `opening`: what the child sent with the session, (conversation id,
        session settings, view), taken before its subscription FIRST began."""
        reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer, process, opening=opening)

    def take_opening(self, conversation_id: str) -> tuple[Any, Any] | None:
        """The settings and view the child sent with `conversation_id` (once): with
        `subscribe`'s channel, what `session_settings` and `snapshot` would give."""
        opening, self._opening = self._opening, None
        if opening is None or opening[0] != conversation_id:
            return None
        return opening[1], opening[2]

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.gone is not None:
            raise self.gone
        call_id = next(self._ids)
        future = self._calls[call_id] = asyncio.get_running_loop().create_future()
        try:
            await write_frame(self._writer, ("call", call_id, method, args, kwargs))
        except (ConnectionError, OSError):
            self._calls.pop(call_id, None)
            raise self._ended() from None
        return await future

    def subscribe(self, conversation_id: str) -> EventChannel:
        """A channel of the conversation's events; the request is written before any
        later call's, so a snapshot asked for after this sees nothing it misses."""
        if self._first_for == conversation_id:  # taken by the child before the view it sent
            self._first_for = None
            return self._channels[FIRST]
        sub = next(self._ids)
        channel = self._channels[sub] = EventChannel(self.limit)
        if self.gone is not None:
            channel.close()
        else:
            self._writer.write(frame(("subscribe", sub, conversation_id)))
        return channel

    async def _read(self) -> None:
        try:
            while True:
                self._dispatch(await read_frame(self._reader))
        except (EOFError, ConnectionError, OSError):
            pass
        finally:
            self._ended()

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind in ("result", "error"):
            future = self._calls.pop(message[1], None)
            if future is not None and not future.done():
                if kind == "result":
                    future.set_result(message[2])
                else:
                    future.set_exception(message[2])
        elif kind == "events":
            channel = self._channels.get(message[1])
            if channel is not None and message[2] is None:  # RESYNC in the child
                channel.overflow()
            elif channel is not None:
                channel.put_many(message[2])
        elif kind == "ended":
            channel = self._channels.pop(message[1], None)
            if channel is not None:
                channel.close()

    def _ended(self) -> HarnessGone:
        """The child's end closed: fail what waits, close every channel."""
        if self.gone is None:
            code = self.process.poll() if self.process is not None else None
            self.gone = HarnessGone(
                "the harness process ended" + (f" (exit {code})" if code is not None else ""),
                hint="resume the session with `bastion -c`; `bastion doctor` checks the setup",
            )
        for future in self._calls.values():
            if not future.done():
                future.set_exception(self.gone)
        self._calls.clear()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        return self.gone

    async def close(self) -> None:
        """Close the harness in the child (leases released), then wait for it to exit."""
        if self.gone is None:
            with contextlib.suppress(HarnessGone, TimeoutError):
                await asyncio.wait_for(self.call("close"), CLOSE_TIMEOUT)
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        if self.process is not None:
            await asyncio.to_thread(_reap, self.process)
        self._task.cancel()


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the child to exit; kill it after CLOSE_TIMEOUT (a wedged store)."""
    try:
        process.wait(CLOSE_TIMEOUT)
    except subprocess.TimeoutExpired:
        log.warning("the harness process did not exit in %.0f s: killed", CLOSE_TIMEOUT)
        process.kill()
        process.wait()


# --- the child's side -------------------------------------------------------------


async def serve(
    harness: Any,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    first: Any = None,
) -> bool:
    """Answer the parent's frames with `harness` until it asks to close it (True) or its
    end closes (False: the parent is gone); the caller closes the harness after.
    `first`: a subscription the child took before the snapshot it sent with the
    session (`opening`), served as FIRST."""
    lock = asyncio.Lock()
    tasks: set[asyncio.Task[None]] = set()

    async def send(obj: Any) -> None:
        async with lock:
            await write_frame(writer, obj)

    def start(coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def forward(subscription: Any, sub: int) -> None:
        channel = EventChannel()
        start(pump(subscription, channel))
        start(_forward(channel, sub, send))

    if first is not None:
        forward(first, FIRST)
    try:
        while True:
            message = await read_frame(reader)
            if message[0] == "subscribe":
                forward(harness.subscribe(message[2]), message[1])
            elif message[0] == "call":
                _, call_id, method, args, kwargs = message
                if method == "close":
                    await harness.close()
                    await send(("result", call_id, None))
                    return True
                start(_answer(harness, call_id, method, args, kwargs, send))
    except (EOFError, ConnectionError, OSError):
        return False  # the parent is gone
    finally:
        for task in tasks:
            task.cancel()


async def _forward(channel: EventChannel, sub: int, send: Any) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while (batch := await channel.get()) is not None:
            await send(("events", sub, None if batch is RESYNC else batch))
        await send(("ended", sub))


async def _answer(
    harness: Any, call_id: int, method: str, args: Any, kwargs: Any, send: Any
) -> None:
    try:
        value = await getattr(harness, method)(*args, **kwargs)
        if method in STAYS:
            value = None
    except Exception as exc:
        reply: tuple[Any, ...] = ("error", call_id, sendable_error(exc))
    else:
        reply = ("result", call_id, value)
    try:
        await send(reply)
    except (ConnectionError, OSError):
        pass
    except Exception as exc:  # the value does not pickle: say so rather than hang the caller
        await send(("error", call_id, sendable_error(exc)))
