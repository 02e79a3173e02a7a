"""Following a conversation that another process drives, through the store alone.

`bastion attach ID` reaches a live driver through its attach socket, which only a
process on the same machine with the same BASTION_HOME can open. A driver on another
machine (or in another home on one PostgreSQL database) has no socket here:
`Harness.follow` makes this harness a follower of it instead. It reads only:

- every `FOLLOW_POLL` seconds the conversation's version (one indexed row), and when
  it moved, the ledger after the last version seen, whose events are published to
  this harness's subscribers as they were committed (`_deliver`), in order. Streamed
  text reaches the ledger as checkpoints (at most every 100 ms), so a follower sees
  an answer grow checkpoint by checkpoint, never delta by delta;
- every `LEASE_POLL` seconds the lease: who drives it, and whether it still lives.

What this process commits itself (a prompt admitted to the inbox, an interrupt
request, an answer to an approval: each a compare-and-set in the store that the
driver polls for) is read back from the ledger like the rest, so its subscribers see
one order. Ops that act inside the driving process (its model, approval mode,
compaction, jobs, history) are refused with `DrivenElsewhere`, naming it.

When the lease expires (the driver died: its pid gone on this host, or its heartbeat
older than the lease) the follower takes the lease as `drive` would, with the options
`follow` was given, and drives the conversation here: what was committed is kept and
resumed exactly as by `bastion -r ID`. The lease is taken only by the store's own
compare-and-set (`try_acquire_lease` decides from the row it locks), so a follower
never takes a lease its driver still heartbeats, and another process that takes it
first leaves this one following.

Why polling and not PostgreSQL's LISTEN/NOTIFY: measured in docs/postgresql.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from runtime.harness.driving import DrivingOps, drive_options
from runtime.model.errors import BastionError, ConversationBusy, SessionFailedError, StoreError
from runtime.model.events import DurableEvent
from runtime.model.results import DriverAt
from runtime.run.aio import wait_until
from runtime.run.driver import lease_live
from runtime.store.ledger import first_row

log = logging.getLogger(__name__)

FOLLOW_POLL = 0.1  # seconds between reads of a followed conversation's version
LEASE_POLL = 1.0  # seconds between reads of its lease (a lease lives 15 s)
BATCH = 500  # ledger events read at once
#: What a ledger row this bastion cannot read back raises (a row written by a newer
#: bastion, or forged by whoever can write the database): the view is then read again
#: from the tables, which hold the same state (the reducer's resync on the gap).
UNREADABLE = (ValueError, LookupError, TypeError, msgspec.MsgspecError)


class Follow:
    """One conversation followed: where it is driven, and the task reading the store."""

    def __init__(self, driver: DriverAt, options: dict[str, Any]) -> None:
        self.driver = driver
        self.options = options  # `drive`'s, for taking the session over
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.cannot: BastionError | None = None  # why this process cannot drive it

    def poke(self) -> None:
        self.wake.set()

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


class FollowOps(DrivingOps):
    async def follow(
        self,
        conversation_id: str,
        *,
        interactive: bool = True,
        on_refusal: Callable[[str, str], None] | None = None,
        approval_mode: str | None = None,
        model: str | None = None,
        allow: Sequence[str] = (),
    ) -> DriverAt | None:
        """Follow `conversation_id` through the store while a live process elsewhere
        drives it; where it is driven. None (nothing started) when no live process
        drives it: drive it then (`drive`). When its driver dies, this harness takes
        the session over with these options (`drive`'s) and drives it here."""
        self._check_open()
        if conversation_id in self._drivers:
            return None
        if (known := self._following.get(conversation_id)) is not None:
            return known.driver
        lease = await self.store.lease(conversation_id)
        if not lease_live(lease, self.lease_ttl):
            return None
        seen = await self.store.version(conversation_id)
        options = drive_options(interactive, on_refusal, approval_mode, model, allow)
        follow = Follow(DriverAt(lease.pid, lease.host), options)
        self._following[conversation_id] = follow
        follow.task = asyncio.create_task(
            self._follow(conversation_id, follow, seen), name=f"follow-{conversation_id}"
        )
        return follow.driver

    def following(self, conversation_id: str) -> DriverAt | None:
        """Where `conversation_id` is driven, while this process follows it."""
        follow = self._following.get(conversation_id)
        return follow.driver if follow is not None else None

    async def unfollow(self, conversation_id: str) -> None:
        follow = self._following.pop(conversation_id, None)
        if follow is not None:
            await follow.stop()

    async def release(self, conversation_id: str) -> None:
        await self.unfollow(conversation_id)
        await super().release(conversation_id)

    async def _follow(self, conversation_id: str, follow: Follow, seen: int) -> None:
        checked = time.monotonic()
        while True:
            follow.wake.clear()
            try:
                seen = await self._catch_up(conversation_id, seen)
                if time.monotonic() - checked >= LEASE_POLL:
                    checked = time.monotonic()
                    if not await self._still_driven(conversation_id, follow) and not follow.cannot:
                        seen = await self._catch_up(conversation_id, seen)
                        if await self._take_over(conversation_id, follow):
                            return
            except SessionFailedError:
                return  # the store failed: the harness says so and closes (seed 004)
            except StoreError as exc:  # busy or locked for now: asked again next time
                log.warning("following %s: %s", conversation_id, exc)
            await wait_until(follow.wake.wait(), FOLLOW_POLL)

    async def _catch_up(self, conversation_id: str, seen: int) -> int:
        """Publish the ledger's events after version `seen`; the version now seen."""
        version = await self.store.version(conversation_id)
        while version > seen:
            try:
                events = await self.store.ledger(conversation_id, seen, BATCH)
            except UNREADABLE as exc:
                seen = await self._around(conversation_id, seen, version, exc)
                continue
            seen = self._publish_read(events, seen, version)
        return seen

    def _publish_read(self, events: list[DurableEvent], seen: int, upto: int) -> int:
        """Publish `events` after `seen` up to version `upto` (a row beyond the
        conversation's version is no commit of its); the version now seen."""
        known = [e for e in events if seen < e.version <= upto]
        for event in known:
            self._deliver(event)
        return known[-1].version if known else upto

    async def _around(self, conversation_id: str, seen: int, version: int, exc: Exception) -> int:
        """A ledger row after `seen` cannot be read back (written by a newer bastion, or
        by whoever else can write the database): publish the events before it and skip
        it; the version gap it leaves makes the view read again from the tables (the
        reducer's resync), which hold the state. The version now seen."""
        bad = await self.store.read(lambda db: first_row(db, conversation_id, seen))
        log.warning(
            "the ledger of %s holds a row that cannot be read (version %s: %s); it is "
            "skipped and the view read again from the tables",
            conversation_id, bad, type(exc).__name__,
        )  # fmt: skip
        if bad is None or bad > version:
            bad = version + 1
        events = await self.store.ledger(conversation_id, seen, BATCH, before=bad)
        seen = self._publish_read(events, seen, bad - 1)
        return seen if len(events) == BATCH else min(bad, version)

    async def _still_driven(self, conversation_id: str, follow: Follow) -> bool:
        lease = await self.store.lease(conversation_id)
        if not lease_live(lease, self.lease_ttl):
            return False
        follow.driver = DriverAt(lease.pid, lease.host)  # (another may have taken it over)
        return True

    async def _take_over(self, conversation_id: str, follow: Follow) -> bool:
        """The driver is gone: drive the session here (True), as `bastion -r` would. False
        (following on) when another process took the lease first, or this one cannot
        drive it (said in the log: the session stays as it was for `bastion -r`)."""
        del self._following[conversation_id]  # (the driver's events are published as made)
        try:
            await self._start_driver(conversation_id, **follow.options)
        except ConversationBusy:
            pass
        except BastionError as exc:  # (a model this machine cannot reach): tried once
            log.warning("cannot take %s over here: %s", conversation_id, exc)
            follow.cannot = exc
        else:
            return True
        self._following[conversation_id] = follow
        return False

    async def _stop_following(self) -> None:
        follows, self._following = list(self._following.values()), {}
        for follow in follows:
            await follow.stop()
