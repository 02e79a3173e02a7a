"""The harness on its own thread and event loop, so no screen can starve it.

A front end that renders (the Textual app) runs its own event loop; if the
harness shared it, a slow frame would delay the model loop, its checkpoints,
heartbeats and tools. Here the harness lives on a `HarnessThread`, and the front
end holds a `ThreadedHarness`: the same async methods as `Harness`, each run on
the harness loop (`asyncio.run_coroutine_threadsafe`) and awaited from the
caller's loop.

    thread = HarnessThread()
    harness = ThreadedHarness(thread.run(Harness.open(...)), thread)  # blocking open
    channel = harness.subscribe(conv_id)        # call from the consumer's loop
    while (batch := await channel.get()) is not None:
        view = resync(...) if batch is RESYNC else fold(view, batch)
    await harness.close()                       # closes the harness, stops the thread

Events reach the consumer through an `EventChannel`: bounded, and coalescing.
Consecutive text deltas of one run are joined into one `TextDeltas` while they
wait, so a consumer that takes them once a frame folds one event per frame, not
thousands. If the consumer still falls `limit` items behind, what is queued is
dropped and the next `get()` returns `RESYNC`: reload a snapshot (the reducer's
`resync_required`) and go on. The producer never blocks and never waits for the
consumer.

No textual import here: any front end (or a test) can use it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any, Final, TypeVar

from runtime.ipc.thread import HarnessThread
from runtime.model.errors import BastionError
from runtime.model.events import (
    EntryAdded,
    EntryClosed,
    InboxUpdated,
    ReasoningDelta,
    RunUpdated,
    TextDelta,
    ToolCallUpdated,
)
from runtime.model.results import McpServerStatus
from runtime.model.views import ConversationView, ReasoningDeltas, TextDeltas, ViewEvent

__all__ = [
    "RESYNC",
    "EventChannel",
    "HarnessProxy",
    "HarnessThread",
    "ThreadedHarness",
    "channel_for",
]

T = TypeVar("T")

DEFAULT_LIMIT: Final = 4096  # queued items (a joined run of deltas counts once)
#: Changes a person waits to see (a run ending, an approval asked, a queued message
#: taken): `EventChannel.rest` ends early for them. Text and output keep their pace.
URGENT: Final = (RunUpdated, ToolCallUpdated, InboxUpdated, EntryAdded, EntryClosed)


class _Resync:
    """The marker `EventChannel.get()` returns after an overflow."""

    def __repr__(self) -> str:
        return "RESYNC"


RESYNC: Final = _Resync()
_JOINED: Final = (TextDelta, ReasoningDelta)  # deltas a channel joins


class _Joining:
    """Text (or reasoning) deltas of one run and entry, consecutive in seq (and text
    offset), waiting to be joined."""

    __slots__ = ("end", "first", "last_seq", "parts")

    def __init__(self, first: TextDelta | ReasoningDelta) -> None:
        self.first = first
        self.parts = [first.text]
        self.last_seq = first.seq
        self.end = first.offset + len(first.text) if type(first) is TextDelta else 0

    def take(self, event: ViewEvent) -> bool:
        first = self.first
        if not isinstance(event, _JOINED):  # (already joined ones, elsewhere: kept as they are)
            return False
        if (
            type(event) is type(first)
            and event.seq == self.last_seq + 1
            and (type(event) is not TextDelta or event.offset == self.end)
            and event.run_id == first.run_id
            and event.epoch == first.epoch
            and event.entry_id == first.entry_id
        ):
            self.parts.append(event.text)
            self.last_seq = event.seq
            self.end += len(event.text)
            return True
        return False

    def event(self) -> ViewEvent:
        first = self.first
        if len(self.parts) == 1:
            return first
        if isinstance(first, ReasoningDelta):
            return ReasoningDeltas(
                first.conversation_id,
                first.run_id,
                first.epoch,
                first.seq,
                self.last_seq,
                first.entry_id,
                "".join(self.parts),
            )
        return TextDeltas(
            first.conversation_id,
            first.run_id,
            first.epoch,
            first.seq,
            self.last_seq,
            first.entry_id,
            first.offset,
            "".join(self.parts),
        )


class EventChannel:
    """Events from a producer (any thread) to one consumer on an asyncio loop.

    `put_many` never blocks; `get()` waits for the next batch: everything queued,
    oldest first, with runs of deltas joined; `RESYNC` after an overflow; None once
    closed and drained (`poll()`: the same without waiting). `rest(seconds)` is the
    consumer's pause between batches, cut short by an URGENT event.
    """

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.overflows = 0
        self._lock = threading.Lock()
        self._items: deque[ViewEvent | _Joining] = deque()
        self._overflowed = False
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._urgent = False  # an URGENT event is queued
        self._rester: asyncio.Future[None] | None = None  # `rest` waiting for one
        self._loop: asyncio.AbstractEventLoop | None = None

    def put_many(self, events: Sequence[ViewEvent]) -> None:
        with self._lock:
            if self._closed:
                return
            items = self._items
            tail = items[-1] if items else None
            for event in events:
                if isinstance(tail, _Joining) and tail.take(event):
                    continue
                tail = _Joining(event) if isinstance(event, _JOINED) else event
                items.append(tail)
                self._urgent = self._urgent or isinstance(event, URGENT)
            if len(items) > self.limit:
                self._drop_locked()
                self.overflows += 1
            self._wake_locked()

    def overflow(self) -> None:
        """Drop what is queued: the next `get()` says RESYNC (the producer fell behind
        somewhere upstream, as in another process's channel)."""
        with self._lock:
            self.overflows += 1
        self.resync()

    def resync(self) -> None:
        """The consumer wants a whole snapshot (its view left entries out): the next
        `get()` says RESYNC at once, and what is queued is dropped (the snapshot has it)."""
        with self._lock:
            self._drop_locked()
            self._wake_locked()

    def _drop_locked(self) -> None:
        self._items.clear()
        self._overflowed = True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake_locked()

    def _wake_locked(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(_release, waiter)
        if self._urgent or self._overflowed or self._closed:
            rester, self._rester = self._rester, None
            if rester is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(_release, rester)

    async def rest(self, seconds: float) -> None:
        """Wait `seconds`, or less if an URGENT event (or an overflow, or the end) is
        queued meanwhile: a consumer pacing its frames still shows those at once."""
        with self._lock:
            if self._urgent or self._overflowed or self._closed or seconds <= 0:
                return
            self._loop = asyncio.get_running_loop()
            rester = self._rester = self._loop.create_future()
        try:
            await asyncio.wait([rester], timeout=seconds)
        finally:
            with self._lock:
                if self._rester is rester:
                    self._rester = None

    async def get(self) -> list[ViewEvent] | _Resync | None:
        while True:
            with self._lock:
                taken = self._take_locked()
                if taken is not None or self._closed:
                    return taken
                self._loop = asyncio.get_running_loop()
                waiter = self._waiter = self._loop.create_future()
            await waiter

    def poll(self) -> list[ViewEvent] | _Resync | None:
        """What `get()` would return now, without waiting: `[]` when nothing is queued
        (None once closed and drained)."""
        with self._lock:
            taken = self._take_locked()
            return [] if taken is None and not self._closed else taken

    def _take_locked(self) -> list[ViewEvent] | _Resync | None:
        if self._overflowed:
            self._overflowed = self._urgent = False
            return RESYNC
        if not self._items:
            return None
        items, self._items = self._items, deque()
        self._urgent = False
        return [i.event() if isinstance(i, _Joining) else i for i in items]


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def pump(sub: Any, channel: EventChannel) -> None:
    """Move a harness `Subscription`'s events into `channel`, a batch per wake-up."""
    try:
        async for event in sub:
            channel.put_many([event, *sub.pending()])
    finally:
        sub.close()
        channel.close()


class HarnessProxy:
    """The front-end surface of a `Harness` that lives elsewhere (another thread, another
    process): each method is `call(name, ...)`, which the subclass carries there.

    `elsewhere`: the harness does not run on the caller's loop, so the caller's own CPU
    time is its screen's (see `tui.app.pause`).
    """

    elsewhere: Final = True
    attached: Final = False
    gone: BastionError | None = None  # (a harness process that ended says why)

    def take_opening(self, conversation_id: str) -> tuple[Any, Any] | None:
        return None  # (the harness process sends one: runtime.ipc.remote)

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def subscribe(self, conversation_id: str) -> EventChannel:
        raise NotImplementedError

    async def snapshot(self, conversation_id: str, last: int | None = None) -> ConversationView:
        view: ConversationView = await self.call("snapshot", conversation_id, last)
        return view

    async def submit(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("submit", *args, **kwargs)

    async def respond(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("respond", *args, **kwargs)

    async def proposed_rules(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("proposed_rules", *args, **kwargs)

    async def rules(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("rules", *args, **kwargs)

    async def interrupt(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("interrupt", *args, **kwargs)

    async def redirect(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("redirect", *args, **kwargs)

    async def withdraw(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("withdraw", *args, **kwargs)

    async def send_held(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("send_held", *args, **kwargs)

    async def set_reasoning_effort(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("set_reasoning_effort", *args, **kwargs)

    async def cancel_compaction(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("cancel_compaction", *args, **kwargs)

    async def drive(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("drive", *args, **kwargs)

    async def set_defaults(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("set_defaults", *args, **kwargs)

    async def usage(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("usage", *args, **kwargs)

    async def compact(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("compact", *args, **kwargs)

    async def export(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("export", *args, **kwargs)

    async def session_settings(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("session_settings", *args, **kwargs)

    async def set_approval_mode(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("set_approval_mode", *args, **kwargs)

    async def set_model(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("set_model", *args, **kwargs)

    async def fork(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("fork", *args, **kwargs)

    async def mcp_servers(self, *, wait: bool = False) -> tuple[McpServerStatus, ...]:
        servers: tuple[McpServerStatus, ...] = await self.call("mcp_servers", wait=wait)
        return servers

    async def rewind(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("rewind", *args, **kwargs)

    async def restore_plan(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("restore_plan", *args, **kwargs)

    async def restore(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("restore", *args, **kwargs)

    async def switch_session(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("switch_session", *args, **kwargs)

    async def new_session(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("new_session", *args, **kwargs)

    async def session_summaries(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("session_summaries", *args, **kwargs)

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("search", *args, **kwargs)

    async def resolve_id(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("resolve_id", *args, **kwargs)

    async def short_ids(self, *args: Any, **kwargs: Any) -> Any:
        return await self.call("short_ids", *args, **kwargs)


class ThreadedHarness(HarnessProxy):
    """A `Harness` on a `HarnessThread`, seen from another loop: the same async methods.

    Only the front-end surface is proxied; anything else (`call`) runs any coroutine
    function of the harness on its loop.
    """

    def __init__(self, harness: Any, thread: HarnessThread, *, limit: int = DEFAULT_LIMIT) -> None:
        self.harness = harness
        self.thread = thread
        self.limit = limit
        self._pumps: list[concurrent.futures.Future[None]] = []

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.thread.call(getattr(self.harness, method)(*args, **kwargs))

    def subscribe(self, conversation_id: str) -> EventChannel:
        channel = EventChannel(self.limit)
        # Scheduled before any later call (the loop runs callbacks in order), so a
        # snapshot asked for after this sees nothing the subscription misses.
        self._pumps.append(self.thread.submit(self._pump(conversation_id, channel)))
        return channel

    async def _pump(self, conversation_id: str, channel: EventChannel) -> None:
        await pump(self.harness.subscribe(conversation_id), channel)

    def model_info(self, spec: str) -> Any:
        """Pure lookup in the harness's immutable config: safe from any thread."""
        return self.harness.model_info(spec)

    def output_cap(self, spec: str) -> int:
        return int(self.harness.output_cap(spec))

    async def close(self) -> None:
        """Close the harness on its loop, then stop the thread."""
        if self.thread.alive:
            await self.call("close")
            self.thread.stop()


def channel_for(harness: Any, conversation_id: str, limit: int = DEFAULT_LIMIT) -> EventChannel:
    """An `EventChannel` of `conversation_id`'s events from a Harness or a ThreadedHarness.

    A plain Harness on the caller's own loop (tests) gets the same channel, pumped by a
    task on that loop; call from inside the loop.
    """
    if isinstance(harness, HarnessProxy):
        return harness.subscribe(conversation_id)
    channel = EventChannel(limit)
    sub = harness.subscribe(conversation_id)
    task = asyncio.get_running_loop().create_task(pump(sub, channel))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return channel


_tasks: set[asyncio.Task[None]] = set()
