"""The Harness: the public API of the durable runtime.

    harness = await Harness.open(path, resolve_model=...)
    conv = await harness.create_conversation(cwd)
    await harness.drive(conv.id)                      # take the lease, resume
    item = await harness.submit(conv.id, "hi", request_key="k1")
    run = await harness.wait(item.id)

Admission (the user entry and its queued run, or a queued inbox item while
busy) is committed before any provider call. Durable events are published
after their commit; transient deltas as they stream. `snapshot()` gives a view
that the pure reducer (`runtime.views.reduce`) keeps current from events.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from runtime.approvals import ApprovalMode
from runtime.driver import Driver, DriverConfig, new_run
from runtime.errors import BastionError, HarnessClosed, UnknownRun
from runtime.events import Event, InboxUpdated, RunUpdated
from runtime.ids import uuid7
from runtime.loop import LoopSettings, place_item
from runtime.providers.base import Provider
from runtime.records import (
    Approval,
    Conversation,
    InboxItem,
    InboxMode,
    InboxState,
    Run,
    ToolCallState,
)
from runtime.store import Store
from runtime.toolbox import Toolbox
from runtime.views import ConversationView, StreamCursor, view_from_snapshot

ResolveModel = Callable[[str], tuple[Provider, str]]
ToolboxFactory = Callable[[Conversation], Toolbox | None]


class EmptyInput(BastionError):
    code = "empty_input"


def default_home() -> Path:
    home = os.environ.get("BASTION_HOME")
    if home:
        return Path(home)
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(data) / "bastion"


class Subscription:
    """Events in publication order, as an async iterator. `close()` when done."""

    def __init__(self, harness: Harness, conversation_id: str | None) -> None:
        self.conversation_id = conversation_id
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._harness = harness

    def _put(self, event: Event | None) -> None:
        self._queue.put_nowait(event)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event

    def pending(self) -> list[Event]:
        """Whatever is queued now, without waiting."""
        out: list[Event] = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is None:
                self._queue.put_nowait(None)
                break
            out.append(event)
        return out

    def close(self) -> None:
        self._harness._subscriptions.discard(self)
        self._put(None)


class Harness:
    def __init__(
        self,
        store: Store,
        home: Path,
        resolve_model: ResolveModel | None,
        toolbox_factory: ToolboxFactory | None,
        loop_settings: LoopSettings,
        lease_ttl: float,
    ) -> None:
        self.store = store
        self.home = home
        self.owner = uuid7()
        self.epoch = random.getrandbits(31) | 1
        self.loop_settings = loop_settings
        self.lease_ttl = lease_ttl
        self._resolve_model = resolve_model
        self._toolbox_factory = toolbox_factory
        self._providers: dict[str, tuple[Provider, str]] = {}
        self._drivers: dict[str, Driver] = {}
        self._subscriptions: set[Subscription] = set()
        self._run_waiters: dict[str, list[asyncio.Future[Run]]] = {}
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        resolve_model: ResolveModel | None = None,
        toolbox_factory: ToolboxFactory | None = None,
        loop_settings: LoopSettings | None = None,
        lease_ttl: float = 15.0,
    ) -> Harness:
        home = default_home()
        file = Path(path) if path is not None else home / "bastion.sqlite"
        store = await Store.open(file)
        return cls(
            store,
            file.parent,
            resolve_model,
            toolbox_factory,
            loop_settings or LoopSettings(),
            lease_ttl,
        )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in list(self._drivers.values()):
            await driver.stop()
            if driver.config.toolbox is not None:
                driver.config.toolbox.close()
        self._drivers.clear()
        for provider, _ in self._providers.values():
            await provider.aclose()
        for sub in list(self._subscriptions):
            sub.close()
        await self.store.close()

    async def __aenter__(self) -> Harness:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessClosed("the harness is closed")

    # --- events -----------------------------------------------------------

    def subscribe(self, conversation_id: str | None = None) -> Subscription:
        sub = Subscription(self, conversation_id)
        self._subscriptions.add(sub)
        return sub

    def _publish(self, event: Event) -> None:
        for sub in self._subscriptions:
            if sub.conversation_id is None or sub.conversation_id == event.conversation_id:
                sub._put(event)
        if isinstance(event, RunUpdated) and event.run.terminal:
            for future in self._run_waiters.pop(event.run.id, []):
                if not future.done():
                    future.set_result(event.run)

    # --- conversations ----------------------------------------------------

    async def create_conversation(
        self,
        cwd: str,
        *,
        settings: dict[str, Any] | None = None,
        title: str = "",
        conversation_id: str | None = None,
    ) -> Conversation:
        self._check_open()
        now = time.time()
        conv = Conversation(conversation_id or uuid7(), title, cwd, dict(settings or {}), now, now)
        event = await self.store.create_conversation(conv)
        self._publish(event)
        return event.conversation

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self.store.get_conversation(conversation_id)

    async def list_conversations(self, cwd: str | None = None) -> list[Conversation]:
        return await self.store.list_conversations(cwd)

    async def update_settings(self, conversation_id: str, **changes: Any) -> Conversation:
        conv = await self.store.get_conversation(conversation_id)
        updated = conv.but(settings={**conv.settings, **changes})
        async with self.store.write(conversation_id) as tx:
            tx.update_conversation(updated)
        for event in tx.events:
            self._publish(event)
        return await self.store.get_conversation(conversation_id)

    async def snapshot(self, conversation_id: str) -> ConversationView:
        """The stored state, with what this process streamed but has not committed yet."""
        snap = await self.store.snapshot(conversation_id)
        view = view_from_snapshot(snap)
        driver = self._drivers.get(conversation_id)
        if driver is None or not driver.live:
            return view
        entries = list(view.entries)
        cursors: dict[str, StreamCursor] = {}
        for run_id, live in driver.live.items():
            if live.seq:
                cursors[run_id] = StreamCursor(live.epoch, live.seq)
            for i in range(len(entries) - 1, -1, -1):
                if entries[i].id == live.entry_id:
                    entries[i] = entries[i].but(text=live.text)
                    break
        return view_from_snapshot(
            type(snap)(snap.conversation, tuple(entries), snap.runs, snap.inbox, snap.tool_calls),
            cursors,
        )

    # --- driving ----------------------------------------------------------

    def resolve_model(self, spec: str) -> tuple[Provider, str]:
        """Provider and model name for `spec` (cached); raises ConfigError."""
        if spec not in self._providers:
            if self._resolve_model is None:
                raise BastionError("this harness was opened without a model resolver")
            self._providers[spec] = self._resolve_model(spec)
        return self._providers[spec]

    async def drive(
        self,
        conversation_id: str,
        *,
        interactive: bool = True,
        on_refusal: Callable[[str, str], None] | None = None,
    ) -> Driver:
        """Become this conversation's driver: take the lease, recover, run its work."""
        self._check_open()
        if conversation_id in self._drivers:
            return self._drivers[conversation_id]
        conv = await self.store.get_conversation(conversation_id)
        agent = conv.agent
        provider, model = self.resolve_model(agent.model)
        toolbox = self._toolbox_factory(conv) if self._toolbox_factory else None
        config = DriverConfig(
            provider=provider,
            model=model,
            toolbox=toolbox,
            approval_mode=ApprovalMode.parse(agent.approval_mode or "ask"),
            interactive=interactive,
            loop=self.loop_settings,
            lease_ttl=self.lease_ttl,
            on_refusal=on_refusal,
        )
        driver = Driver(self.store, conversation_id, self.owner, self.epoch, self._publish, config)
        try:
            await driver.start()
        except BaseException:
            if toolbox is not None:
                toolbox.close()
            raise
        self._drivers[conversation_id] = driver
        return driver

    async def release(self, conversation_id: str) -> None:
        driver = self._drivers.pop(conversation_id, None)
        if driver is not None:
            await driver.stop()
            if driver.config.toolbox is not None:
                driver.config.toolbox.close()

    async def submit(
        self,
        conversation_id: str,
        text: str,
        *,
        request_key: str | None = None,
        mode: InboxMode = InboxMode.PROMPT,
    ) -> InboxItem:
        """Admit input. Idle: a user entry and a queued run; busy: a queued inbox item.

        The same `request_key` again returns the item it admitted the first time.
        """
        self._check_open()
        if not text.strip():
            raise EmptyInput("the prompt is empty", hint="type something for the agent to do")
        async with self.store.write(conversation_id) as tx:
            found = await tx.inbox_by_key(request_key) if request_key is not None else None
            if found is not None:
                item = found
            else:
                item = await self._admit(tx, conversation_id, text, request_key, mode)
        for event in tx.events:
            self._publish(event)
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.wake()
        return item

    @staticmethod
    async def _admit(
        tx: Any, conversation_id: str, text: str, request_key: str | None, mode: InboxMode
    ) -> InboxItem:
        cur = await tx.db.execute(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE conversation_id = ? AND state IN "
            "('queued', 'running', 'awaiting_approval')), "
            "(SELECT title FROM conversations WHERE id = ?)",
            (conversation_id, conversation_id),
        )
        busy, title = await cur.fetchone()
        item = InboxItem(
            uuid7(), conversation_id, mode, text, InboxState.QUEUED, time.time(), request_key
        )
        if busy:
            return tx.put_inbox(item)  # type: ignore[no-any-return]
        run = new_run(conversation_id, item.id)
        tx.put_run(run)
        place_item(tx, item, run.id)
        if not title:
            conv = await tx.conversation()
            tx.update_conversation(conv.but(title=_title_from(text)))
        return item.but(state=InboxState.PLACED, run_id=run.id)

    async def withdraw(self, conversation_id: str, item_id: str) -> bool:
        """Withdraw a queued steer or follow-up; false if it was already placed."""
        snap = await self.store.snapshot(conversation_id)
        item = next((i for i in snap.inbox if i.id == item_id), None)
        if item is None or item.state != InboxState.QUEUED:
            return False
        async with self.store.write(conversation_id) as tx:
            cur = await tx.db.execute("SELECT state FROM inbox WHERE id = ?", (item_id,))
            row = await cur.fetchone()
            if row is None or row[0] != InboxState.QUEUED:
                return False
            tx.put_inbox(item.but(state=InboxState.WITHDRAWN))
        for event in tx.events:
            self._publish(event)
        return True

    async def respond(self, conversation_id: str, tool_call_id: str, approve: bool) -> None:
        """Answer a pending approval; the decision is committed, then the driver woken."""
        snap = await self.store.snapshot(conversation_id)
        call = next((c for c in snap.tool_calls if c.id == tool_call_id), None)
        if call is None or call.approval != Approval.PENDING or call.state != ToolCallState.PENDING:
            raise UnknownRun(f"no pending approval {tool_call_id}")
        decided = call.but(
            approval=Approval.APPROVED if approve else Approval.DENIED, updated_at=time.time()
        )
        async with self.store.write(conversation_id) as tx:
            tx.put_tool_call(decided)
        for event in tx.events:
            self._publish(event)
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.decided(tool_call_id)

    async def interrupt(self, conversation_id: str) -> bool:
        driver = self._drivers.get(conversation_id)
        return await driver.interrupt() if driver is not None else False

    # --- waiting ----------------------------------------------------------

    async def wait(self, item_id: str, conversation_id: str, *, poll: float = 1.0) -> Run:
        """Wait until the run of inbox item `item_id` ends; returns that run."""
        while True:
            snap = await self.store.snapshot(conversation_id)
            item = next((i for i in snap.inbox if i.id == item_id), None)
            if item is None:
                raise UnknownRun(f"no submission {item_id} in conversation {conversation_id}")
            if item.state == InboxState.WITHDRAWN:
                raise UnknownRun(f"submission {item_id} was withdrawn")
            if item.run_id is not None:
                return await self.wait_run(item.run_id, conversation_id, poll=poll)
            await self._pause(conversation_id, poll)

    async def wait_run(self, run_id: str, conversation_id: str, *, poll: float = 1.0) -> Run:
        """Wait for run `run_id` to end. Woken by its event; the store is re-read every
        `poll` seconds so a run driven by another process is seen to end too."""
        future: asyncio.Future[Run] = asyncio.get_running_loop().create_future()
        self._run_waiters.setdefault(run_id, []).append(future)
        try:
            while True:
                snap = await self.store.snapshot(conversation_id)
                run = next((r for r in snap.runs if r.id == run_id), None)
                if run is None:
                    raise UnknownRun(f"no run {run_id}")
                if run.terminal:
                    return run
                driver = self._drivers.get(conversation_id)
                if driver is not None and driver.failure is not None:
                    raise driver.failure
                try:
                    return await asyncio.wait_for(asyncio.shield(future), timeout=poll)
                except TimeoutError:
                    continue
        finally:
            waiters = self._run_waiters.get(run_id, [])
            if future in waiters:
                waiters.remove(future)

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

            await asyncio.wait_for(next_placement(), timeout=poll)
        except TimeoutError:
            pass
        finally:
            sub.close()


def _title_from(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
