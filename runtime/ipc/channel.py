"""`EventChannel`: a harness's events on their way to one consumer, bounded and coalescing.

The server keeps one per subscription of each connection (runtime.ipc.server), and a
client one per subscription it holds (runtime.ipc.client). Consecutive text deltas of
one run are joined into one `TextDeltas` while they wait, so a consumer that takes
them once a frame folds one event per frame, not thousands. If the consumer still
falls `limit` items behind, what is queued is dropped and the next `get()` returns
`RESYNC`: reload a snapshot (the reducer's `resync_required`) and go on. The producer
never blocks and never waits for the consumer.

    channel = client.subscribe(conv_id)
    while (batch := await channel.get()) is not None:
        view = resync(...) if batch is RESYNC else fold(view, batch)
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any, Final, TypeVar

from runtime.model.events import (
    EntryAdded,
    EntryClosed,
    InboxUpdated,
    ReasoningDelta,
    RunUpdated,
    TextDelta,
    ToolCallUpdated,
)
from runtime.model.views import ReasoningDeltas, TextDeltas, ViewEvent

__all__ = ["DEFAULT_LIMIT", "RESYNC", "URGENT", "EventChannel", "pump"]

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

    def __init__(self, limit: int = DEFAULT_LIMIT, *, join: bool = True) -> None:
        self.limit = limit
        self.join = join  # False: every delta kept as it came (print mode's stream-json)
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
                tail = _Joining(event) if self.join and isinstance(event, _JOINED) else event
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
