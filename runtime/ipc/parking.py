"""`ParkingClient`: the app's client of a harness process that parks when the session
is idle and is started again on the next call.

Parking (`park`): the harness hands the conversation's lease to this process as a
parked lease and exits (runtime.harness.parking; the protocol's `park`). The client
keeps everything its holder sees: its subscriptions' channels stay open and quiet.
The next call (any op: a prompt, a command) first wakes it: `waker` starts a harness
process again (which takes the parked lease back by compare-and-set) and gives its
connection; the client says hello, subscribes each channel again and tells each to
resync (its holder reads the view anew: whatever changed meanwhile), then sends the
call. Calls made while it parks or wakes wait for that and are sent once, in order.
A harness that cannot be started again ends the client as a dead process would
(`gone`, with the reason it gave).

    client = await ParkingClient.connect(conn, client="app", owner=True, process=proc)
    client.waker = start_again                  # async (Parked) -> (Connection, process)
    parked = await client.park(conversation_id) # NotIdle: nothing changed
    await client.submit(conversation_id, "hi")  # woken first
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.ipc.channel import EventChannel
from runtime.ipc.client import HarnessClient, _reap, hello
from runtime.ipc.wire import Connection
from runtime.model import protocol as p
from runtime.model.errors import BastionError, HarnessGone, NotIdle
from runtime.model.results import Parked

__all__ = ["ParkingClient", "Waker"]

#: Starts the harness process again for a parked lease: its connection and process.
Waker = Callable[[Parked], Awaitable[tuple[Connection, subprocess.Popen[bytes] | None]]]


class ParkingClient(HarnessClient):
    """A `HarnessClient` whose harness may park (see the module)."""

    def __init__(self, conn: Connection, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.waker: Waker | None = None
        #: The parked lease while no harness process runs (None: one runs).
        self.parked: Parked | None = None
        self._parking = False
        self._settled = asyncio.Event()  # set while not parking
        self._settled.set()
        self._waking: asyncio.Future[None] | None = None
        self._subscribed: dict[int, tuple[str, bool]] = {}  # sub -> (conversation, join)

    @property
    def asleep(self) -> bool:
        """No harness process runs (parked, or parking)."""
        return self.parked is not None or self._parking

    async def park(self, conversation_id: str) -> Parked:
        """Park the harness (NotIdle, nothing changed, when there is work, a call in
        flight, or nothing to wake it with); once its process has exited."""
        if self.waker is None or self.gone is not None:
            raise NotIdle("this client cannot start its harness again: it does not park")
        if self.asleep or self._calls:
            raise NotIdle("the harness is parked already, or a call is under way")
        self._parking = True
        self._settled.clear()
        try:
            parked: Parked = await super().call(
                p.Park(conversation=conversation_id, pid=os.getpid())
            )
        except BaseException:
            self._parking = False
            self._settled.set()
            if self._task is not None and self._task.done():  # (it died as it answered)
                super()._ended()
            raise
        try:
            await self._let_go()
        finally:
            self.parked = parked
            self._parking = False
            self._settled.set()
        return parked

    async def _let_go(self) -> None:
        """The parked harness's connection ends and its process exits: wait for both."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.conn.close()
        if self.process is not None:
            await asyncio.to_thread(_reap, self.process)

    async def wake(self) -> None:
        """Start the harness again if it is parked (once, however many wait)."""
        while self._parking:
            await self._settled.wait()
        if self.parked is None:
            return
        if self._waking is None or self._waking.done():
            self._waking = asyncio.ensure_future(self._wake(self.parked))
        await asyncio.shield(self._waking)

    async def _wake(self, parked: Parked) -> None:
        assert self.waker is not None
        try:
            conn, process = await self.waker(parked)
            said = await hello(conn, "app")
        except (BastionError, OSError) as exc:  # (it could not be started, or driven)
            self.parked = None
            hint = exc.hint if isinstance(exc, BastionError) else None
            self.gone = HarnessGone(f"the harness could not be started again: {exc}", hint=hint)
            super()._ended()
            raise self.gone from exc
        self.conn, self.process = conn, process
        self.server_pid = said.get("pid") if isinstance(said.get("pid"), int) else None
        self._task = asyncio.get_running_loop().create_task(self._read())
        self.parked = None
        for sub, (conversation_id, join) in list(self._subscribed.items()):
            channel = self._channels.get(sub)
            if channel is None:
                continue
            self._send_subscribe(sub, conversation_id, join)
            channel.overflow()  # (its holder reads the view again: what changed meanwhile)

    # --- the client, around a harness that may be parked -----------------------------

    async def call(self, op: p.Op) -> Any:
        if self.asleep:
            await self.wake()
        return await super().call(op)

    def _ended(self) -> HarnessGone:
        if self._parking and not any(isinstance(op, p.Park) for op, _ in self._calls.values()):
            # the parked harness's connection ended after its reply: nothing is lost
            return HarnessGone("the harness parked")
        return super()._ended()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if self._parking and message.get("ended"):
            return  # (a subscription the parking harness ended: kept for the next one)
        super()._dispatch(message)

    def subscribe(self, conversation_id: str, *, join: bool = True) -> EventChannel:
        if not self.asleep:
            channel = super().subscribe(conversation_id, join=join)
            for sub, mine in self._channels.items():
                if mine is channel:
                    self._subscribed[sub] = (conversation_id, join)
            return channel
        sub = next(self._subs)  # (subscribed when it wakes)
        channel = self._channels[sub] = EventChannel(self.limit, join=join)
        self._subscribed[sub] = (conversation_id, join)
        return channel

    async def unsubscribe(self, channel: EventChannel) -> None:
        if self.asleep:
            for sub, mine in list(self._channels.items()):
                if mine is channel:
                    del self._channels[sub]
            channel.close()
        else:
            await super().unsubscribe(channel)
        for sub in list(self._subscribed):
            if sub not in self._channels:
                del self._subscribed[sub]

    def _send_subscribe(self, sub: int, conversation_id: str, join: bool) -> None:
        request_id = next(self._ids)
        op = p.Subscribe(conversation=conversation_id, sub=sub, join=join)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._calls[request_id] = (op, future)
        self.conn.writer.write(p.line(p.encode_request(request_id, op)))

    async def close(self) -> Any:
        if self.parked is None:
            return await super().close()
        self.parked = None  # (no harness runs: nothing to close; the lease's process ends)
        self.gone = HarnessGone("the app closed")
        super()._ended()
        return None
