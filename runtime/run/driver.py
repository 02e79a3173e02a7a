"""A conversation's driver: the one process that runs its work, under a lease.

The lease (owner, pid, host, heartbeat, fencing token) lives on the
conversation row. A live holder refuses a second driver (ConversationBusy
naming its pid); a dead one (its pid gone on this host, or its heartbeat older
than the TTL) is taken over with a new token, and the old owner's late
commits are refused by that token. After taking over, the driver closes the
streaming partials of unfinished runs as interrupted and carries on with
them: queued work runs oldest first; pending approvals stay pending.

The driver is supervised: an unexpected error commits its run as failed (with
the error, where the store still can), stops the heartbeat and releases the
lease, so nothing is left `running` behind a process that gave up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable

import msgspec

from runtime.config.approvals import ApprovalMode
from runtime.config.settings import RuleBook
from runtime.context.catalog import ModelInfo
from runtime.context.compaction import CompactionSettings
from runtime.hooks.points import Hooks
from runtime.model.errors import (
    BastionError,
    ConversationBusy,
    LeaseLost,
    NotIdle,
    SessionFailedError,
    StoreError,
)
from runtime.model.events import Event
from runtime.model.ids import uuid7, uuid7_time
from runtime.model.llm import Provider
from runtime.model.records import ACTIVE_RUN_STATES, Entry, EntryStatus, Run, RunState
from runtime.model.tools import Toolbox
from runtime.run.aio import wait_until
from runtime.run.deps import LoopDeps, LoopSettings
from runtime.run.jobs import JobKeeper
from runtime.run.live import LiveStream
from runtime.run.loop import RunExecutor
from runtime.run.placing import place_item
from runtime.run.spend import count_crashed
from runtime.run.urgent import URGENT_REASON, urgent_first, urgent_waiting
from runtime.store import failpoints
from runtime.store.database import LeaseInfo, Store
from runtime.store.storefile import pid_alive, process_started
from runtime.store.tx import ENTRY_COLUMNS, Tx, entry_row

log = logging.getLogger(__name__)
HOST = socket.gethostname()
IDLE_POLL = 1.0  # while idle, how often the store is asked for work another process admitted
WATCH_POLL = 0.25  # while a run goes, how often the store is asked for an interrupt request


#: The owner id of a parked lease: `PARKED` + a UUIDv7 made as it was handed over.
#: The app's harness process parks when the session is idle (tui.parking): it hands
#: the lease to the app's own process, which runs no driver and beats no heartbeat.
#: On this host such a lease is held while that process lives (`driver_alive`), so
#: `bastion -r ID` still meets ConversationBusy, and a killed app frees it at once;
#: on another host (its pid cannot be checked) it expires by its heartbeat's age
#: like any lease. Only the harness process the app starts again takes it back
#: (`Driver(parked=...)`, compare-and-set on the token, which it advances).
PARKED = "parked-"


def lease_expired(lease: LeaseInfo, ttl: float, now: float) -> bool:
    """Can a new driver take this lease? Its pid on this host gone, a zombie or reused
    by a later process, or a stale heartbeat: older than `ttl` by the store's clock
    when the store read one (`lease.clock`), else by `now`. A parked lease on this
    host: only when its process is gone (it has no heartbeat to keep)."""
    if lease.owner is None:
        return True
    if lease.host == HOST and lease.pid is not None and not driver_alive(lease.pid, lease.owner):
        return True
    if lease.owner.startswith(PARKED) and lease.host == HOST and lease.pid is not None:
        return False  # (its process lives: driver_alive above)
    now = lease.clock if lease.clock is not None else now
    return lease.heartbeat is None or now - lease.heartbeat > ttl


#: Slack for comparing a process's start time (whole-second boot time plus clock
#: ticks) with an owner id's millisecond time.
_START_SLACK = 2.0


def driver_alive(pid: int, owner: str) -> bool:
    """Is process `pid` (this host's) still the driver `owner` that took the lease?

    Not when it is gone or a zombie (`pid_alive`), nor when it started after the owner
    id was made: an owner id is a UUIDv7 its harness made once running, so a process
    younger than it is another program that was given the same pid. Where the start
    time cannot be read (not Linux), a live pid counts as the driver.
    """
    if not pid_alive(pid):
        return False
    started, made = process_started(pid), uuid7_time(owner.removeprefix(PARKED))
    return started is None or made is None or started <= made + _START_SLACK


def lease_live(lease: LeaseInfo, ttl: float) -> bool:
    return lease.owner is not None and not lease_expired(lease, ttl, time.time())


class DriverConfig(msgspec.Struct):
    provider: Provider
    model: str
    model_info: ModelInfo
    output_cap: int
    toolbox: Toolbox | None
    approval_mode: ApprovalMode
    interactive: bool
    loop: LoopSettings
    lease_ttl: float = 15.0
    on_refusal: Callable[[str, str], None] | None = None
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    rules: RuleBook | None = None
    hooks: Hooks | None = None


class Driver:
    def __init__(
        self,
        store: Store,
        conversation_id: str,
        owner: str,
        epoch: int,
        publish: Callable[[Event], None],
        config: DriverConfig,
        *,
        parked: str | None = None,
    ) -> None:
        #: The parked lease (its owner id) this driver may take back (runtime.run.driver:
        #: PARKED): the one the app that started this process holds.
        self.parked = parked
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
        self._summary: asyncio.Task[Entry | None] | None = None  # RunCompaction.detach
        self._run: Run | None = None
        self._run_task: asyncio.Task[Run] | None = None
        self._task: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._released = False
        self.jobs: JobKeeper | None = None  # its background jobs (runtime.run.jobs)

    # --- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Acquire the lease (or raise ConversationBusy), recover, start working."""
        ttl = self.config.lease_ttl
        lease, taken = await self.store.try_acquire_lease(
            self.conversation_id,
            self.owner,
            os.getpid(),
            HOST,
            lambda current: (
                lease_expired(current, ttl, time.time())
                or (self.parked is not None and current.owner == self.parked)
            ),
            publish=self.publish,
        )
        if not taken:
            where = "" if lease.host == HOST else f" on {lease.host}"
            raise ConversationBusy(
                f"conversation {self.conversation_id} is being driven by another bastion "
                f"process (pid {lease.pid}{where})",
                pid=lease.pid,
                hint="wait for it to finish, follow it with `bastion attach`, or stop that process",
            )
        self.token = lease.token
        self._heartbeat = asyncio.create_task(self._beat(), name=f"lease-{self.conversation_id}")
        try:
            await self._recover()
            jobs = JobKeeper(self.store, self.conversation_id, self._commit, self.config.toolbox)
            await jobs.open()  # a dead driver's jobs settled, the model told
            self.jobs = jobs
        except BaseException:
            await self.stop()
            raise
        self._task = asyncio.create_task(self._work(), name=f"driver-{self.conversation_id}")

    async def stop(self) -> None:
        """Shut down: commit what was streamed, leave runs resumable, release the lease
        (a summary still being made in the background is stopped: nothing of it kept)."""
        for task in (self._task, self._heartbeat, self._summary):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._task, self._heartbeat, self._summary):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._release()

    async def _release(self) -> None:
        if self._summary is not None:  # (its commit needs the lease this gives up)
            self._summary.cancel()
        if self._released or isinstance(self.failure, LeaseLost):
            return
        self._released = True
        failed = self.store.failure is not None  # (a storage error: nothing more is written)
        if self.jobs is not None:  # its jobs end with it, recorded while it holds the lease
            try:
                await self.jobs.close("bastion closed the session")
            except Exception as exc:  # (the toolbox's close kills them all the same)
                say = log.info if failed else log.warning
                say("could not end the jobs of %s: %s", self.conversation_id, exc)
        if failed:
            return  # the lease expires by itself (this process's pid, then its heartbeat)
        try:
            await self.store.release_lease(self.conversation_id, self.token, publish=self.publish)
        except (StoreError, SessionFailedError, OSError) as exc:
            # The heartbeat has stopped: the lease expires by itself after its TTL.
            log.warning("could not release the lease of %s: %s", self.conversation_id, exc)

    async def park(self, pid: int) -> LeaseInfo:
        """Hand the lease to process `pid` of this host as a parked lease (PARKED), when
        the conversation is idle (NotIdle if not: nothing changed), then stop: no run,
        heartbeat or job is left (the caller found none). The lease handed over."""
        if self.jobs is not None and any(job.running for job in await self.jobs.listing()):
            raise NotIdle(
                f"conversation {self.conversation_id} has a background job running",
                hint="it parks once the job ends and the session stays idle",
            )
        beat, self._heartbeat = self._heartbeat, None  # (a beat after the handover would
        if beat is not None:  # find the token moved and call the lease lost)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await beat
        try:
            lease = await self.store.park_lease(
                self.conversation_id, self.token, PARKED + uuid7(), pid, HOST, publish=self.publish
            )
        except BaseException:
            self._heartbeat = asyncio.create_task(
                self._beat(), name=f"lease-{self.conversation_id}"
            )
            raise
        self._released = True  # (the lease is the parked process's now: not released)
        for task in (self._task, self._summary):
            if task is not None and not task.done():
                task.cancel()
        for task in (self._task, self._summary):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        return lease

    def wake(self) -> None:
        self._wake.set()

    async def _commit(self, build: Callable[[Tx], object]) -> object:
        """`build` in one transaction fenced by this driver's token."""
        return await self.store.transact(
            self.conversation_id, build, token=self.token, publish=self.publish
        )

    def decided(self, tool_call_id: str) -> None:
        flag = self._decisions.get(tool_call_id)
        if flag is not None:
            flag.set()

    def cancel_run(self, run_id: str) -> bool:
        """Cancel the run in progress if it is `run_id` (its interrupt is committed)."""
        task, executor, run = self._run_task, self._executor, self._run
        if task is None or task.done() or executor is None or run is None or run.id != run_id:
            return False
        if not executor.interrupting:  # once: a second cancel would cut the clean-up short
            executor.interrupting = True
            task.cancel()
        return True

    def give_way(self, run_id: str) -> bool:
        """Cut the stream of run `run_id` for an urgent input (runtime.run.urgent): only
        while it streams (a stream has no effect); a tool call is never cut, the loop
        stops after its step instead. True if the run task was cancelled."""
        task, executor, run = self._run_task, self._executor, self._run
        if task is None or task.done() or executor is None or run is None or run.id != run_id:
            return False
        if executor.interrupting or executor.deps.live.entry_id is None:
            return False
        executor.interrupting = True
        executor.stop_reason = URGENT_REASON
        task.cancel()
        return True

    async def urge(self) -> None:
        """An urgent input was queued: the run going gives way now if it streams."""
        run = self._run
        if run is not None and await self._urgent_for(run):
            self.give_way(run.id)

    async def _urgent_for(self, run: Run) -> bool:
        conv, inbox_id = self.conversation_id, run.inbox_id
        return await self.store.read(lambda db: urgent_waiting(db, conv, inbox_id))

    def cancel_compaction(self) -> bool:
        """Stop the run's compaction under way, not the run; False if there is none."""
        executor = self._executor
        return executor is not None and executor.compaction.cancel()

    async def settled(self, run_id: str) -> None:
        """Wait until the run task of `run_id` (if it is this driver's) has ended."""
        task, run = self._run_task, self._run
        if task is not None and run is not None and run.id == run_id:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(task)

    # --- work -------------------------------------------------------------

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_ttl / 3)
            try:
                held = await self.store.heartbeat(self.conversation_id, self.token)
            except SessionFailedError:
                return  # a storage error ended the harness: it closes
            except StoreError as exc:
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
        """Close the streaming partials of a crashed driver as interrupted (chunks joined)."""

        def build(tx: Tx) -> None:
            rows = tx.rows(
                f"SELECT {ENTRY_COLUMNS} FROM entries WHERE conversation_id = ? "
                "AND kind = 'assistant' AND status = 'streaming'",
                (self.conversation_id,),
            )
            for row in rows:
                entry = entry_row(row)
                closed = tx.close_entry(entry.id, EntryStatus.INTERRUPTED, entry.data)
                if closed is not None and closed.text:
                    count_crashed(tx, closed)  # its spend counts too (runtime.run.spend)

        await self.store.transact(
            self.conversation_id, build, token=self.token, publish=self.publish
        )
        failpoints.hit("recovered")

    async def _next_run(self) -> Run | None:
        """The unfinished run, else a new one for the oldest queued input (one transaction)."""

        def build(tx: Tx) -> Run | None:
            active = tx.active_run()
            if active is not None:
                return active
            for item in urgent_first(tx.queued_inbox()):
                run = new_run(item.conversation_id, item.id)
                if place_item(tx, item, run.id) is not None:
                    return tx.insert_run(run)
            return None

        return await self.store.transact(
            self.conversation_id, build, token=self.token, publish=self.publish
        )

    async def _work(self) -> None:
        run: Run | None = None
        try:
            while True:
                self._wake.clear()
                run = await self._next_run()
                if run is None:
                    self.idle.set()
                    await wait_until(self._wake.wait(), IDLE_POLL)
                    continue
                self.idle.clear()
                await self._execute(run)
                run = None
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.debug("driver of %s failed", self.conversation_id, exc_info=True)
            await self._supervise(run, exc)

    async def _supervise(self, run: Run | None, exc: BaseException) -> None:
        """An unexpected error: fail the run where the store still can, stop, release."""
        self.failure = exc
        stored = self.store.failure is None  # (a storage error: the run stays resumable)
        if run is not None and stored and not isinstance(exc, LeaseLost):
            error = {
                "code": getattr(exc, "code", "internal"),
                "message": f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, BastionError)
                else exc.message,
            }
            try:
                await self.store.transact(
                    self.conversation_id,
                    lambda tx: tx.transition_run(
                        run.id,
                        ACTIVE_RUN_STATES,
                        state=RunState.FAILED,
                        reason=error["message"],
                        error=error,
                    ),
                    token=self.token,
                    publish=self.publish,
                )
            except (BastionError, OSError) as store_exc:
                log.warning("could not record the failure of run %s: %s", run.id, store_exc)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        await self._release()
        self.idle.set()

    def reconfigure(
        self,
        *,
        approval_mode: ApprovalMode | None = None,
        provider: Provider | None = None,
        model: str | None = None,
    ) -> None:
        """Change this process's settings. A new approval mode holds from the next tool
        call (of the run going on, too); a new model from the next run."""
        if approval_mode is not None:
            self.config.approval_mode = approval_mode
            if self._executor is not None:
                self._executor.deps.approval_mode = approval_mode
        if provider is not None and model is not None:
            self.config.provider = provider
            self.config.model = model

    async def _execute(self, run: Run) -> None:
        live = LiveStream(self.epoch)
        self.live[run.id] = live
        deps = LoopDeps(
            store=self.store,
            publish=self.publish,
            provider=self.config.provider,
            model=self.config.model,
            model_info=self.config.model_info,
            output_cap=self.config.output_cap,
            toolbox=self.config.toolbox,
            approval_mode=self.config.approval_mode,
            interactive=self.config.interactive,
            token=self.token,
            live=live,
            wait_for_decision=self._wait_decision,
            settings=self.config.loop,
            on_refusal=self.config.on_refusal,
            compaction=self.config.compaction,
            rules=self.config.rules,
            hooks=self.config.hooks,
        )
        self._executor = RunExecutor(deps, self.conversation_id)
        if self._summary is not None:  # (an earlier run's background summary, still made)
            self._executor.compaction.adopt(self._summary)
            self._summary = None
        self._run = run
        self._run_task = asyncio.create_task(self._executor.execute(run))
        watcher = asyncio.create_task(self._watch(run.id))
        try:
            await self._run_task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is not None and me.cancelling():
                raise
            # The run task alone was cancelled (not this driver): a bug, not a stop.
            raise RuntimeError(f"run {run.id} was cancelled outside an interrupt") from None
        finally:
            watcher.cancel()
            self.live.pop(run.id, None)
            self._summary = self._executor.leftover  # placed when it lands (seed 004)
            if self._summary is not None:
                self._summary.add_done_callback(_said)
            self._executor = None
            self._run_task = None
            self._run = None

    async def _watch(self, run_id: str) -> None:
        """Follow the store for an interrupt (or an urgent input) another process
        committed for this run. A store that fails ends the watch (the run's own next
        write meets the failure too, and the harness says so)."""
        with contextlib.suppress(StoreError, SessionFailedError):
            await self._watching(run_id)

    async def _watching(self, run_id: str) -> None:
        seen = -1
        while True:
            await asyncio.sleep(WATCH_POLL)
            version = await self.store.version(self.conversation_id)
            if version == seen:
                continue
            seen = version
            run = await self.store.run(run_id)
            if run is not None and run.interrupt_requested:
                self.cancel_run(run_id)
                return
            if run is not None and await self._urgent_for(run) and self.give_way(run_id):
                return  # an urgent input another client queued (runtime.run.urgent)

    def _wait_decision(self, tool_call_id: str) -> Awaitable[None]:
        flag = self._decisions.setdefault(tool_call_id, asyncio.Event())
        poll = self.config.loop.approval_poll

        async def wait() -> None:
            try:  # decisions live in the store: another process may answer, so poll too
                await wait_until(flag.wait(), poll)
            finally:
                self._decisions.pop(tool_call_id, None)

        return wait()


def _said(task: asyncio.Task[Entry | None]) -> None:
    """A summary left writing that broke (not a CompactionFailed: that one was said)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("a background summary was not kept: %s", exc)


def new_run(conversation_id: str, inbox_id: str) -> Run:
    stamp = time.time()
    return Run(uuid7(), conversation_id, inbox_id, RunState.QUEUED, stamp, stamp)
