"""A conversation's driver: the one process that runs its work, under a lease.

The lease (owner, pid, host, heartbeat, fencing token) lives on the
conversation row. A live holder refuses a second driver (ConversationBusy
naming its pid); a dead one (its pid gone on this host, or its heartbeat older
than the TTL) is taken over with a new token, and the old owner's late
commits are refused by that token. After taking over, the driver marks the
streaming partials of unfinished runs interrupted and carries on with them:
queued work runs in order; pending approvals stay pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from runtime.approvals import ApprovalMode
from runtime.errors import ConversationBusy, LeaseLost
from runtime.events import Event
from runtime.ids import uuid7
from runtime.loop import LiveStream, LoopDeps, LoopSettings, RunExecutor, place_item
from runtime.providers.base import Provider
from runtime.records import EntryKind, EntryStatus, InboxMode, InboxState, Run, RunState
from runtime.store import LeaseInfo, Store
from runtime.toolbox import Toolbox

log = logging.getLogger(__name__)
HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lease_expired(lease: LeaseInfo, ttl: float, now: float) -> bool:
    """Can a new driver take this lease? Dead pid on this host, or a stale heartbeat."""
    if lease.owner is None:
        return True
    if lease.host == HOST and lease.pid is not None and not pid_alive(lease.pid):
        return True
    return lease.heartbeat is None or now - lease.heartbeat > ttl


@dataclass(slots=True)
class DriverConfig:
    provider: Provider
    model: str
    toolbox: Toolbox | None
    approval_mode: ApprovalMode
    interactive: bool
    loop: LoopSettings
    lease_ttl: float = 15.0
    on_refusal: Callable[[str, str], None] | None = None


class Driver:
    def __init__(
        self,
        store: Store,
        conversation_id: str,
        owner: str,
        epoch: int,
        publish: Callable[[Event], None],
        config: DriverConfig,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.owner = owner
        self.epoch = epoch
        self.publish = publish
        self.config = config
        self.token = 0
        self.live: dict[str, LiveStream] = {}
        self.failure: BaseException | None = None
        self.idle = asyncio.Event()
        self._wake = asyncio.Event()
        self._decisions: dict[str, asyncio.Event] = {}
        self._executor: RunExecutor | None = None
        self._run_task: asyncio.Task[Run] | None = None
        self._task: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    # --- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Acquire the lease (or raise ConversationBusy), recover, start working."""
        ttl = self.config.lease_ttl
        lease, event = await self.store.try_acquire_lease(
            self.conversation_id,
            self.owner,
            os.getpid(),
            HOST,
            lambda current: lease_expired(current, ttl, time.time()),
        )
        if event is None:
            where = "" if lease.host == HOST else f" on {lease.host}"
            raise ConversationBusy(
                f"conversation {self.conversation_id} is being driven by another bastion "
                f"process (pid {lease.pid}{where})",
                pid=lease.pid,
                hint="wait for it to finish, follow it with `bastion attach`, or stop that process",
            )
        self.token = lease.token
        self.publish(event)
        await self._recover()
        self._task = asyncio.create_task(self._work(), name=f"driver-{self.conversation_id}")
        self._heartbeat = asyncio.create_task(self._beat(), name=f"lease-{self.conversation_id}")

    async def stop(self) -> None:
        """Shut down: commit what was streamed, leave runs resumable, release the lease."""
        for task in (self._heartbeat, self._task):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._heartbeat, self._task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.failure is None or not isinstance(self.failure, LeaseLost):
            event = await self.store.release_lease(self.conversation_id, self.token)
            if event is not None:
                self.publish(event)

    def wake(self) -> None:
        self._wake.set()

    def decided(self, tool_call_id: str) -> None:
        flag = self._decisions.get(tool_call_id)
        if flag is not None:
            flag.set()

    async def interrupt(self) -> bool:
        """Interrupt the run in progress; true if there was one."""
        task, executor = self._run_task, self._executor
        if task is None or task.done() or executor is None:
            return False
        executor.interrupting = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
        return True

    # --- work -------------------------------------------------------------

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_ttl / 3)
            try:
                held = await self.store.heartbeat(self.conversation_id, self.token)
            except sqlite3.Error as exc:
                # A busy or failing disk: try again next beat. If it lasts past the
                # TTL another process may take over, and our fenced writes stop.
                log.warning("lease heartbeat of %s failed: %s", self.conversation_id, exc)
                continue
            if not held:
                self.failure = LeaseLost(
                    f"conversation {self.conversation_id} was taken over by another process"
                )
                if self._task is not None:
                    self._task.cancel()
                self.idle.set()
                return

    async def _recover(self) -> None:
        snap = await self.store.snapshot(self.conversation_id)
        open_runs = {r.id for r in snap.runs if not r.terminal}
        stale = [
            e
            for e in snap.entries
            if e.kind == EntryKind.ASSISTANT
            and e.status == EntryStatus.STREAMING
            and (e.run_id in open_runs or e.run_id is None)
        ]
        if not stale:
            return
        async with self.store.write(self.conversation_id, self.token) as tx:
            for entry in stale:
                tx.update_entry(entry.but(status=EntryStatus.INTERRUPTED))
        for event in tx.events:
            self.publish(event)

    async def _next_run(self) -> Run | None:
        snap = await self.store.snapshot(self.conversation_id)
        for run in snap.runs:
            if not run.terminal:
                return run
        queued = [i for i in snap.inbox if i.state == InboxState.QUEUED]
        item = next((i for i in queued if i.mode != InboxMode.STEER), None) or (
            queued[0] if queued else None
        )
        if item is None:
            return None
        async with self.store.write(self.conversation_id, self.token) as tx:
            run = new_run(item.conversation_id, item.id)
            place_item(tx, item, run.id)
            tx.put_run(run)
        for event in tx.events:
            self.publish(event)
        return run

    async def _work(self) -> None:
        try:
            while True:
                self._wake.clear()
                run = await self._next_run()
                if run is None:
                    self.idle.set()
                    await self._wake.wait()
                    continue
                self.idle.clear()
                await self._execute(run)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # Reported to whoever waits on this conversation (Harness.wait raises it).
            log.debug("driver of %s failed", self.conversation_id, exc_info=True)
            self.failure = exc
            self.idle.set()

    async def _execute(self, run: Run) -> None:
        live = LiveStream(self.epoch)
        self.live[run.id] = live
        deps = LoopDeps(
            store=self.store,
            publish=self.publish,
            provider=self.config.provider,
            model=self.config.model,
            toolbox=self.config.toolbox,
            approval_mode=self.config.approval_mode,
            interactive=self.config.interactive,
            token=self.token,
            live=live,
            wait_for_decision=self._wait_decision,
            settings=self.config.loop,
            on_refusal=self.config.on_refusal,
        )
        self._executor = RunExecutor(deps, self.conversation_id)
        self._run_task = asyncio.create_task(self._executor.execute(run))
        try:
            await self._run_task
        finally:
            self.live.pop(run.id, None)
            self._executor = None
            self._run_task = None

    def _wait_decision(self, tool_call_id: str) -> Awaitable[None]:
        flag = self._decisions.setdefault(tool_call_id, asyncio.Event())

        async def wait() -> None:
            try:
                await asyncio.wait_for(flag.wait(), timeout=1.0)
            except TimeoutError:
                pass  # decisions live in the store; another process may have answered
            finally:
                self._decisions.pop(tool_call_id, None)

        return wait()


def new_run(conversation_id: str, inbox_id: str) -> Run:
    now = time.time()
    return Run(uuid7(), conversation_id, inbox_id, RunState.QUEUED, now, now)
