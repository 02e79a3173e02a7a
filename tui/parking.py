"""The app's harness process parks while the session is idle, and comes back when needed.

An idle app is mostly its harness process (the store, the model's client, the tools:
tens of MiB). So once the session has been idle for `idle_park` seconds (the user's
config; 0 never parks) the app asks it to park (the protocol's `park`): when it finds
the session idle (no run, queued input or pending approval, no background job or
subagent, no attached client) it hands the conversation's lease to the app's own
process as a parked lease (runtime.run.driver: PARKED) and exits. The app keeps its
screen. The lease stays held while the app lives, so `bastion -r ID` elsewhere still
meets ConversationBusy; a killed app frees it at once (its pid is gone).

It comes back on the user's first action: the first key typed into the prompt starts
it (so a prompt is answered without waiting for it), and any call that needs it waits
for it (`runtime.ipc.parking.ParkingClient`). The new process takes the parked lease
back by compare-and-set, and the app reads the view again: what changed meanwhile.

`bastion attach ID` still works while parked: the app holds the session's attach
socket (`runtime.ipc.door.Door`, the harness's token beside it) and watches it for a
connection waiting, never accepting it; then it starts the harness process, which
inherits the socket, accepts the connection and checks it (peer and token) as it
always does. A connection from a process that may not attach wakes the harness and
is refused by it; nothing stored changes but the lease's holder.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from runtime import BastionError, NotIdle

if TYPE_CHECKING:
    from runtime import Connection, Door, Parked, ParkingClient

log = logging.getLogger(__name__)


class Parking:
    """When the app's harness process parks and how it wakes (see the module)."""

    def __init__(self, opts: Any, seconds: float) -> None:
        self.opts = opts
        self.seconds = seconds
        self.client: ParkingClient | None = None
        self.conversation: Callable[[], str] = lambda: ""
        self.door: Door | None = None
        self.busy = 0  # commands under way (`holding`)
        self.parks = 0  # times it parked (the status and the tests)
        self.woke_in: float | None = None  # seconds the last wake took
        self._last = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._watching = False
        #: Told when it parks (True) and once it is back (False): the status line.
        self.on_change: Callable[[bool], None] = lambda asleep: None

    @property
    def asleep(self) -> bool:
        return self.client is not None and self.client.asleep

    def start(self, client: Any, conversation: Callable[[], str]) -> None:
        """Watch for an idle session on `client` (the app's, once it is opened)."""
        from runtime import ParkingClient

        if self.door is not None and self.door.conversation_id != conversation():
            self.close()  # (it follows another conversation now: that one's socket goes)
        if self.seconds <= 0 or not isinstance(client, ParkingClient) or self.client is client:
            return
        self.client, self.conversation = client, conversation
        client.waker = self._start_again
        self._task = asyncio.get_running_loop().create_task(self._idle())

    def poke(self) -> None:
        """Something happened (a key, an event, a call): the idle time starts again."""
        self._last = time.monotonic()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """While a command runs: not idle."""
        self.busy += 1
        self.poke()
        try:
            yield
        finally:
            self.busy -= 1
            self.poke()

    def wake_soon(self) -> None:
        """The user started typing: start the harness now if it is parked (errors are
        the next call's to report)."""
        self.poke()
        if self.client is not None and self.client.asleep:
            task = asyncio.get_running_loop().create_task(self.client.wake())
            task.add_done_callback(_quiet)

    async def _idle(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, self._last + self.seconds - time.monotonic()))
            client = self.client
            if client is None or client.gone is not None:
                return
            if client.asleep:  # (nothing to do until it wakes: look again in idle_park)
                self.poke()
                continue
            if self.busy or time.monotonic() - self._last < self.seconds:
                continue
            try:
                parked = await client.park(self.conversation())
            except NotIdle:
                self.poke()  # (work, or another client: try again after idle_park more)
                continue
            except BastionError as exc:  # (gone: the app's follower says so)
                log.warning("the harness could not park: %s", exc)
                return
            self.parks += 1
            self.poke()
            self._keep_door(parked)
            self.on_change(True)

    def _keep_door(self, parked: Parked) -> None:
        """Hold the attach socket's path while parked, and watch it (see the module)."""
        from runtime import Door, default_home

        conversation = self.conversation()
        if self.door is not None and self.door.conversation_id != conversation:
            self.close()
        if self.door is None and parked.attach_token is not None:
            door = Door(default_home(), conversation, parked.attach_token)
            try:
                door.open()
            except (OSError, BastionError) as exc:
                log.warning("cannot keep the attach socket while parked: %s", exc)
                return
            self.door = door
        if self.door is not None and not self._watching:
            asyncio.get_running_loop().add_reader(self.door.fileno(), self._knocked)
            self._watching = True

    def _knocked(self) -> None:
        """A connection waits on the attach socket: start the harness to answer it."""
        self._unwatch()
        self.wake_soon()

    def _unwatch(self) -> None:
        if self._watching and self.door is not None and self.door.sock is not None:
            asyncio.get_running_loop().remove_reader(self.door.fileno())
        self._watching = False

    async def _start_again(self, parked: Parked) -> tuple[Connection, Any]:
        """The harness process again, for `parked` (ParkingClient.waker)."""
        from tui.child import Child

        started = time.monotonic()
        self._unwatch()
        opts = argparse.Namespace(**vars(self.opts))
        stored = bool(parked.owner)  # (else nothing was sent: it is prepared anew, its id kept)
        opts.resume, opts.session_id, opts.continue_, opts.prompt = (
            (self.conversation(), None) if stored else (None, self.conversation())
        ) + (False, None)  # fmt: skip
        opts.request_key = None
        if parked.approval_mode:  # (chosen for that process alone: this one keeps them)
            opts.approval_mode = parked.approval_mode
        if parked.model:
            opts.model = parked.model
        child = Child.start(
            opts, check_model=False, parked=parked if stored else None, door=self.door
        )
        child.drive()
        try:
            conn, _ = await child.connection()
        except BaseException:
            await asyncio.to_thread(child.close)
            raise
        self.woke_in = time.monotonic() - started
        self.poke()
        self.on_change(False)
        return conn, child.process

    def close(self) -> None:
        """The app leaves (or drives another conversation): let the socket go."""
        self._unwatch()
        door, self.door = self.door, None
        if door is not None:
            door.close()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.close()


def _quiet(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # (seen: the call that waits for it reports it)
