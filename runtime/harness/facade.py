"""The Harness: the public API of the durable runtime.

    harness = await Harness.open(path, resolve_model=...)
    conv = await harness.create_conversation(cwd)
    await harness.drive(conv.id)                      # take the lease, resume
    item = await harness.submit(conv.id, "hi", request_key="k1")
    run = await harness.wait(item.id)

Admission (the user entry and its queued run, or a queued inbox item while
busy) is committed before any provider call. Durable events are published
after their commit; transient deltas as they stream. `snapshot()` gives a view
that the pure reducer (`runtime.model.views.reduce`) keeps current from events.

The Harness is assembled from parts, each a module: runtime.harness.core (shared
state, events, snapshots), runtime.harness.session_ops (search, fork, rewind,
restore, export, import), runtime.harness.approving (approvals and rules),
runtime.harness.driving (drivers, models, this process's settings),
runtime.harness.jobs (background jobs) and
runtime.run.admission (the admission transaction). This module holds opening and
closing, admission, interrupts and waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

from runtime.agents import unfinished_children
from runtime.context.instructions import ProjectInstructions, load_instructions
from runtime.harness.approving import ApprovalOps
from runtime.harness.core import (
    HarnessCore,
    ResolveModel,
    Subscription,
    ToolboxFactory,
)
from runtime.harness.following import FollowOps
from runtime.harness.jobs import JobOps
from runtime.harness.parking import ParkingOps
from runtime.harness.resetting import ResetOps
from runtime.harness.session_ops import SessionOps
from runtime.model.errors import (
    Busy,
    ConfigError,
    ConversationBusy,
    ConversationExists,
    InputHeld,
    SessionFailedError,
    StoreError,
    UnknownRun,
)
from runtime.model.events import DurableEvent, InboxUpdated, RunUpdated, SessionFailed
from runtime.model.ids import now, uuid7
from runtime.model.records import (
    Conversation,
    Entry,
    EntryKind,
    EntryStatus,
    InboxItem,
    InboxMode,
    InboxState,
    Run,
    RunState,
    SessionSettings,
    ToolCallRecord,
)
from runtime.model.results import CloseReport, Interruption, Redirection, Supersession
from runtime.run.admission import (
    AdmittedBefore,
    admit_first_tx,
    admit_tx,
    check_text,
    new_conversation,
    title_from,
)
from runtime.run.aio import wait_until
from runtime.run.calls import interrupt_tx
from runtime.run.deps import LoopSettings
from runtime.run.redirect import redirect_tx, supersede_tx
from runtime.setup.load import Config, default_home
from runtime.setup.storechoice import configured_store
from runtime.store import failpoints
from runtime.store.database import Store
from runtime.store.tx import TOOL_COLUMNS, Tx, tool_call_row

__all__ = [
    "Harness",
    "HarnessCore",
    "Interruption",
    "ResolveModel",
    "SessionSettings",
    "Subscription",
    "ToolboxFactory",
    "default_home",
    "new_conversation",
]

log = logging.getLogger(__name__)

#: Seconds a closing harness gives its drivers to settle before it abandons them (the
#: app's harness process is itself given 10 s to close: runtime.ipc.client).
CLOSE_GRACE = 5.0


class Harness(SessionOps, ApprovalOps, ResetOps, FollowOps, JobOps, ParkingOps):
    #: The close a storage error started (`_store_failed`), while it goes.
    failed_closing: asyncio.Future[CloseReport] | None = None

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        resolve_model: ResolveModel | None = None,
        toolbox_factory: ToolboxFactory | None = None,
        loop_settings: LoopSettings | None = None,
        lease_ttl: float = 15.0,
        config: Config | None = None,
    ) -> Harness:
        """`config` supplies the model catalog overrides, output caps and compaction
        settings (runtime.setup.load); without it, the catalog's defaults."""
        home = default_home()
        location = os.fspath(path) if path is not None else configured_store(config=config)
        store = await Store.open(location or home / "bastion.sqlite")
        harness = cls(
            store,
            store.path.parent if store.path is not None else home,
            resolve_model,
            toolbox_factory,
            loop_settings or LoopSettings(),
            lease_ttl,
            config,
        )
        store.on_failure = harness._store_failed
        if config is not None and config.mcp_servers:
            harness.start_mcp()
        return harness

    def _store_failed(self, failure: SessionFailedError) -> None:
        """A storage error (seed 004: it "ends the Harness"): the store already refuses
        every read and write with `failure`, so no run writes more; every subscriber is
        told once (`SessionFailed`), whoever waits for a run hears `failure` now, and the
        harness closes itself (`closed` settles: `wait_closed`, `failed_closing`)."""
        if self.failure is not None or self._closed:
            return
        self.failure = failure
        log.info("%s", failure)  # (each front end says it, in one line)
        for sub in list(self._subscriptions):
            cid = sub.conversation_id or ""
            sub._put(SessionFailed(cid, failure.reason, failure.message, failure.hint or ""))
        for futures in self._run_waiters.values():
            for future in futures:
                if not future.done():
                    future.set_exception(failure)
        self._run_waiters.clear()
        self.failed_closing = asyncio.ensure_future(self.close())

    async def close(self, grace: float = CLOSE_GRACE) -> CloseReport:
        """Close in two phases (seed 000): every driver is asked to settle (what was
        streamed committed, its run left resumable, its lease released) and given
        `grace` seconds together; one that has not settled by then is abandoned (its
        lease expires by itself, its run resumes when opened again). Then providers
        and the store close. The report says which settled and which did not. A
        failing store (locked, corrupt) is reported in the log, never a hang."""
        if self._closed:
            if self.failed_closing is not None and not self.failed_closing.done():
                return await asyncio.shield(self.failed_closing)  # (closing itself)
            if self.serving is not None:  # (kept by a storage error's close: see there)
                serving, self.serving = self.serving, None
                await serving.close()
            return CloseReport(grace=grace)
        self._closed = True
        await self._stop_following()
        drivers = dict(self._drivers)
        stops = {cid: asyncio.ensure_future(d.stop()) for cid, d in drivers.items()}
        if stops:
            await asyncio.wait(stops.values(), timeout=grace)
        self._drivers.clear()
        remaining = tuple(cid for cid, task in stops.items() if not task.done())
        for cid, task in stops.items():
            if not task.done():
                task.cancel()  # the second phase: forced
                log.warning("the driver of %s did not settle within %g s", cid, grace)
            elif not task.cancelled() and (exc := task.exception()) is not None:
                (log.info if self.failure else log.warning)(
                    "stopping the driver of %s: %s", cid, exc
                )
            toolbox = drivers[cid].config.toolbox
            if toolbox is not None:
                toolbox.close()
        settled = tuple(cid for cid in stops if cid not in remaining)
        await self._close_rest()
        return CloseReport(settled=settled, remaining=remaining, grace=grace)

    async def _close_rest(self) -> None:
        if self.mcp is not None:
            await self.mcp.close()
        # A storage error's close keeps serving other processes' clients (`bastion
        # attach`): they hear the SessionFailed and get its typed error for each op, not
        # a connection cut before they know why; the front end's own close ends it.
        if self.serving is not None and self.failure is None:
            serving, self.serving = self.serving, None
            await serving.close()
        for provider, _ in self._providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        for sub in list(self._subscriptions):
            sub.close()
        try:
            await self.store.close()
        except StoreError as exc:
            log.warning("closing the store: %s", exc)
        finally:
            self._closed_event.set()

    async def wait_closed(self) -> None:
        """Until this harness is closed (the protocol's server ends its connections then)."""
        await self._closed_event.wait()

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- conversations ----------------------------------------------------

    async def create_conversation(
        self,
        cwd: str,
        *,
        settings: dict[str, Any] | None = None,
        title: str = "",
        conversation_id: str | None = None,
    ) -> Conversation:
        """An empty conversation, committed now. Front ends prefer `submit(create=...)`,
        which commits a new conversation together with its first prompt."""
        self._check_open()
        conv, _ = await self.store.create_conversation(
            new_conversation(cwd, settings=settings, title=title, conversation_id=conversation_id),
            publish=self._publish,
        )
        return conv

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self.store.get_conversation(conversation_id)

    async def exists(self, conversation_id: str) -> bool:
        return await self.store.exists(conversation_id)

    async def was_deleted(self, conversation_id: str) -> bool:
        return await self.store.deleted(conversation_id)

    async def list_conversations(
        self, cwd: str | None = None, *, with_entries: bool = False
    ) -> list[Conversation]:
        return await self.store.list_conversations(cwd, with_entries=with_entries)

    async def ledger(self, conversation_id: str, after: int = 0) -> list[DurableEvent]:
        return await self.store.ledger(conversation_id, after)

    async def project_instructions(self, cwd: str) -> ProjectInstructions:
        """The AGENTS.md / CLAUDE.md files a run in `cwd` reads, and the text they make
        (see runtime.context.instructions); for status lines and first-run notes."""
        return await asyncio.to_thread(load_instructions, cwd)

    async def admitted(self, request_key: str) -> tuple[str, str] | None:
        """(conversation id, inbox item id) admitted under `request_key`, from any session."""
        found = await self.store.admission(request_key)
        return (found[0], found[1]) if found else None

    async def submit(
        self,
        conversation_id: str,
        text: str,
        *,
        request_key: str | None = None,
        mode: InboxMode = InboxMode.PROMPT,
        create: Conversation | None = None,
        when_busy: str = "queue",
    ) -> InboxItem:
        """Admit input. Idle: a user entry and a queued run; busy: a queued inbox item,
        or, with `when_busy="reject"`, the typed `Busy` and nothing admitted.

        With `create`, a conversation that does not exist yet is committed in the same
        transaction as this first input (so no conversation is ever left empty). A
        request key is admitted once across all conversations: the same key with the
        same input returns the item it admitted; with other input it is refused
        (RequestKeyReused)."""
        self._check_open()
        check_text(text)

        if when_busy not in ("queue", "reject"):
            raise ConfigError(
                f"when_busy is 'queue' or 'reject', not {when_busy!r}",
                hint="queue waits for the run; reject refuses the input while one goes",
            )

        def admit(tx: Tx) -> InboxItem:
            return admit_tx(tx, text, request_key, mode, reject_busy=when_busy == "reject")

        create = create or self._prepared.get(conversation_id)
        if create is not None and await self.store.exists(conversation_id):
            await self._adopt_existing(conversation_id)  # (created since it was prepared)
        elif create is not None:
            try:
                _, item = await self.store.create_conversation(
                    create.but(id=conversation_id, title=create.title or title_from(text)),
                    lambda tx: admit_first_tx(tx, text, request_key, mode),
                    publish=self._publish,
                )
            except AdmittedBefore as before:  # nothing was created: the key's own item
                return before.item
            except ConversationExists:
                # Another process created this id first (`--session-id` raced): this one
                # goes on as for an id that existed, its driver first (ConversationBusy
                # while the other drives it: then nothing of this input is stored).
                await self._adopt_existing(conversation_id)
                item = None
            if item is not None:
                return await self._created(conversation_id, item)
        item = await self.store.transact(conversation_id, admit, publish=self._publish)

        failpoints.hit("admitted")
        driver = self._drivers.get(item.conversation_id)
        if driver is not None:
            driver.wake()
            if item.mode == InboxMode.INTERRUPT_NEXT and item.state == InboxState.QUEUED:
                await driver.urge()  # the run going gives way (runtime.run.urgent)
        return item

    async def _created(self, conversation_id: str, item: InboxItem) -> InboxItem:
        """The first input committed with its conversation: drive it (as `drive` asked)."""
        self._prepared.pop(conversation_id, None)
        failpoints.hit("admitted")
        options = self._deferred.pop(conversation_id, None)
        if options is not None:
            try:
                await self._start_driver(conversation_id, **options)
            except ConversationBusy as exc:
                # Between the commit and the lease, a process that found this request
                # key took the lease (`bastion -p --request-key` raced): it runs the
                # admitted item, and this one follows it in the store (`wait`).
                log.info("another process drives the admitted input: %s", exc)
        return item

    async def _adopt_existing(self, conversation_id: str) -> None:
        """The prepared conversation's id was created by another process: drive the one
        stored, as `drive` asked (ConversationBusy while the other process drives it)."""
        self._prepared.pop(conversation_id, None)
        options = self._deferred.pop(conversation_id, None)
        if options is not None:
            await self._start_driver(conversation_id, **options)

    async def write(self, conversation_id: str, text: str) -> Entry:
        """Append `text` to the conversation as a user entry without asking the model
        (seed 004's writes): the model reads it with the next input. Only while the
        conversation is idle (the typed `Busy` otherwise, nothing written: a run keeps
        its own list of entries, and a write in the middle of its turn would not reach
        it)."""
        self._check_open()
        check_text(text)

        def build(tx: Tx) -> Entry:
            if tx.active_run() is not None or tx.queued_inbox():
                raise Busy(
                    "a run is going in this conversation (or input waits for one), so "
                    "nothing was written",
                    hint="write when the run ends, or send the text as a steer",
                )
            entry = Entry(
                uuid7(), conversation_id, 0, EntryKind.USER, EntryStatus.COMPLETE, text,
                now(), data={"written": True},
            )  # fmt: skip
            return tx.add_entry(entry)

        return await self.store.transact(conversation_id, build, publish=self._publish)

    async def withdraw(self, conversation_id: str, item_id: str) -> bool:
        """Withdraw a queued (or held) steer or follow-up: false (nothing changed) if it
        was placed first, or withdrawn already."""

        def build(tx: Tx) -> InboxItem | None:
            gone = tx.transition_inbox(item_id, InboxState.WITHDRAWN)
            if gone is None:
                gone = tx.transition_inbox(
                    item_id, InboxState.WITHDRAWN, from_state=InboxState.HELD
                )
            return gone

        done = await self.store.transact(conversation_id, build, publish=self._publish)
        return done is not None

    async def send_held(self, conversation_id: str) -> tuple[InboxItem, ...]:
        """Send what was held behind a failed run (issue 25, item 13): every held item
        is queued again, in its order, and the driver woken; () if nothing was held."""

        def build(tx: Tx) -> list[InboxItem]:
            moved = (
                tx.transition_inbox(i.id, InboxState.QUEUED, from_state=InboxState.HELD)
                for i in tx.held_inbox()
            )
            return [item for item in moved if item is not None]

        released = await self.store.transact(conversation_id, build, publish=self._publish)
        driver = self._drivers.get(conversation_id)
        if released and driver is not None:
            driver.wake()
        return tuple(released)

    async def interrupt(self, conversation_id: str) -> Interruption:
        """Interrupt the active run: the request is committed first (so any process can
        make it), queued inputs are withdrawn and handed back, then the run is
        cancelled by whichever process drives it."""

        run, withdrawn = await self.store.transact(
            conversation_id, interrupt_tx, publish=self._publish
        )
        await self._stop(conversation_id, run)
        return Interruption(run.id if run is not None else None, tuple(withdrawn))

    async def redirect(
        self, conversation_id: str, text: str, *, request_key: str | None = None
    ) -> Redirection:
        """Interrupt and redirect in one action: the interrupt (as `interrupt`) and `text`
        as the next prompt, committed together (runtime.run.redirect); the cut run
        is cancelled and the next one starts with `text`. A request key is admitted once,
        as with `submit`: asking again with it cuts nothing."""
        self._check_open()
        check_text(text)
        run, withdrawn, item = await self.store.transact(
            conversation_id, lambda tx: redirect_tx(tx, text, request_key), publish=self._publish
        )
        await self._stop(conversation_id, run)
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.wake()  # the new prompt is queued: its run starts now
        return Redirection(run.id if run is not None else None, tuple(withdrawn), item)

    async def supersede(
        self, conversation_id: str, text: str | None = None, *, request_key: str | None = None
    ) -> Supersession:
        """End the run going and discard its unfinished work from the model's context,
        kept in the record (seed 000's supersede; runtime.run.redirect): committed in one
        transaction before anything is cancelled, with `text` (if any) as the next
        prompt. NotRunning, nothing changed, when no run is going."""
        self._check_open()
        if text is not None:
            check_text(text)
        done = await self.store.transact(
            conversation_id,
            lambda tx: supersede_tx(tx, text, request_key),
            publish=self._publish,
        )
        failpoints.hit("superseded")  # decided, nothing cancelled yet (the crash tests)
        await self._stop(conversation_id, await self.store.run(done.run_id))
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.wake()
        return done

    async def _stop(self, conversation_id: str, run: Run | None) -> None:
        """After an interrupt was committed: the subagents it is waiting for stop with it
        (the whole tree), and `run` is cancelled here if this process drives it."""
        for child in await self.store.read(lambda db: unfinished_children(db, conversation_id)):
            await self.interrupt(child)
        driver = self._drivers.get(conversation_id)
        if run is not None and driver is not None:
            if not driver.cancel_run(run.id):
                driver.wake()  # a queued run: the driver finishes it as interrupted
            await driver.settled(run.id)

    # --- waiting ----------------------------------------------------------

    async def wait(self, item_id: str, conversation_id: str, *, poll: float = 1.0) -> Run:
        """Wait until the run of inbox item `item_id` ends; returns that run."""
        while True:
            item = await self.store.inbox_item(item_id)
            if item is None:
                raise UnknownRun(f"no submission {item_id} in conversation {conversation_id}")
            if item.state == InboxState.WITHDRAWN:
                raise UnknownRun(f"submission {item_id} was withdrawn")
            if item.state == InboxState.HELD:
                raise InputHeld(
                    f"submission {item_id} is held: the run before it failed",
                    hint="send it with /send (Ctrl+R in the app) or withdraw it",
                )
            if item.run_id is not None:
                return await self.wait_run(item.run_id, item.conversation_id, poll=poll)
            await self._pause(item.conversation_id, poll)

    async def wait_run(self, run_id: str, conversation_id: str, *, poll: float = 1.0) -> Run:
        """Wait for run `run_id` to end. Woken by its event; the run's row is re-read every
        `poll` seconds so a run driven by another process is seen to end too."""
        future: asyncio.Future[Run] = asyncio.get_running_loop().create_future()
        self._run_waiters.setdefault(run_id, []).append(future)
        try:
            while True:
                run = await self.store.run(run_id)
                if run is None:
                    raise UnknownRun(f"no run {run_id}")
                if run.terminal:
                    return run
                driver = self._drivers.get(conversation_id)
                if driver is not None and driver.failure is not None:
                    raise driver.failure
                if await wait_until(future, poll):
                    return future.result()
        finally:
            waiters = self._run_waiters.get(run_id, [])
            if future in waiters:
                waiters.remove(future)

    async def wait_idle(self, conversation_id: str, *, poll: float = 1.0) -> Run | None:
        """Wait until the conversation has no unfinished run or queued input; returns its
        latest run. Raises the driver's failure if it stopped."""
        while await self.store.unfinished(conversation_id):
            await self._pause(conversation_id, poll)
        driver = self._drivers.get(conversation_id)
        if driver is not None and driver.failure is not None:
            raise driver.failure
        return await self.store.latest_run(conversation_id)

    async def answer(self, run: Run) -> str:
        """The text of a run's answer (its result entry, else its last assistant text)."""

        def read(db: Any) -> str:
            if run.result_entry_id:
                row = db.execute(
                    "SELECT text FROM entries WHERE id = ?", (run.result_entry_id,)
                ).fetchone()
                if row:
                    return str(row[0])
            row = db.execute(
                "SELECT text FROM entries WHERE run_id = ? AND kind = 'assistant' AND text != '' "
                "ORDER BY position DESC LIMIT 1",
                (run.id,),
            ).fetchone()
            return str(row[0]) if row else ""

        text = await self.store.read(read)
        if text or run.state == RunState.COMPLETED:
            return text
        # A run that stopped mid-answer (failed, interrupted): its answer so far lives in
        # checkpointed chunks until the entry is sealed; the view puts them together.
        view = await self.snapshot(run.conversation_id)
        mine = [e for e in view.entries if e.run_id == run.id and e.kind == EntryKind.ASSISTANT]
        return str(view.text_of(mine[-1])) if mine else ""

    async def run_calls(self, run: Run) -> list[ToolCallRecord]:
        """A run's tool calls, in order: one SELECT, not a snapshot of the session."""
        rows = await self.store.read(
            lambda db: db.execute(
                f'SELECT {TOOL_COLUMNS} FROM tool_calls WHERE run_id = ? ORDER BY created_at, "index"',
                (run.id,),
            ).fetchall()
        )
        return [tool_call_row(r) for r in rows]

    async def _pause(self, conversation_id: str, poll: float) -> None:
        driver = self._drivers.get(conversation_id)
        if driver is not None and driver.failure is not None:
            raise driver.failure
        sub = self.subscribe(conversation_id)
        try:

            async def next_placement() -> None:
                async for event in sub:
                    if isinstance(event, InboxUpdated | RunUpdated):
                        return

            await wait_until(next_placement(), poll)
        finally:
            sub.close()
