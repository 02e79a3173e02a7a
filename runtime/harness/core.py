"""The state every part of the Harness shares, and its events.

`HarnessCore` holds what one process knows about the conversations it touches:
the store, its drivers and attach servers, its subscriptions, the conversations
prepared but not committed yet and the settings this process drives them with.
The Harness (runtime.harness) is this plus the mixins that act on it:
runtime.harness.session_ops (search, fork, rewind, restore, export, import),
runtime.harness.approving (approvals and rules) and runtime.harness.driving (drivers,
models and this process's settings).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from runtime.agents.children import pending_child_calls
from runtime.model.errors import DrivenElsewhere, HarnessClosed, SessionFailedError
from runtime.model.events import Event, RunUpdated, ToolCallUpdated
from runtime.model.ids import uuid7
from runtime.model.llm import Provider
from runtime.model.records import Conversation, Run, SessionSettings
from runtime.model.results import DriverAt
from runtime.model.tools import Toolbox
from runtime.model.views import ConversationView, StreamCursor, view_from_snapshot
from runtime.run.deps import LoopSettings
from runtime.run.driver import Driver
from runtime.setup.load import Config
from runtime.store.database import Store
from runtime.store.tx import Tx

if TYPE_CHECKING:
    from runtime.mcp.hub import McpHub

ResolveModel = Callable[[str], tuple[Provider, str]]
ToolboxFactory = Callable[[Conversation], Toolbox | None]


class Serving(Protocol):
    """Serves each conversation this harness drives to clients of other processes."""

    async def start(self, conversation_id: str) -> None: ...

    async def stop(self, conversation_id: str, *, keep: bool = False) -> None:
        """Stop serving it; `keep`: its socket's path and token stay (parking)."""
        ...

    async def close(self) -> None: ...

    def clients(self, conversation_id: str) -> int:
        """How many clients of other processes are connected to it now."""
        ...

    def token(self, conversation_id: str) -> str | None:
        """The token its clients must give (None: it is not served)."""
        ...


class Subscription:
    """Events in publication order, as an async iterator. `close()` when done."""

    def __init__(self, harness: HarnessCore, conversation_id: str | None) -> None:
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


class Followed(Protocol):
    """A conversation followed through the store (runtime.harness.following)."""

    driver: DriverAt

    def poke(self) -> None:
        """Read the ledger now (a commit of this process's own landed)."""

    async def stop(self) -> None:
        """Stop reading the store for it."""


class HarnessCore:
    def __init__(
        self,
        store: Store,
        home: Path,
        resolve_model: ResolveModel | None,
        toolbox_factory: ToolboxFactory | None,
        loop_settings: LoopSettings,
        lease_ttl: float,
        config: Config | None = None,
    ) -> None:
        self.store = store
        self.config = config or Config()
        self.home = home
        self.owner = uuid7()
        self.epoch = random.getrandbits(31) | 1
        self.loop_settings = loop_settings
        self.lease_ttl = lease_ttl
        self._resolve_model = resolve_model
        self._toolbox_factory = toolbox_factory
        self._providers: dict[str, tuple[Provider, str]] = {}
        self._drivers: dict[str, Driver] = {}
        # How this process serves the conversations it drives to other clients (their
        # attach sockets: runtime.ipc.listen), when its front end gives one.
        self.serving: Serving | None = None
        self._closed_event = asyncio.Event()
        self._subscriptions: set[Subscription] = set()
        self._run_waiters: dict[str, list[asyncio.Future[Run]]] = {}
        self._deferred: dict[str, dict[str, Any]] = {}
        self._prepared: dict[str, Conversation] = {}
        self._settings: dict[str, SessionSettings] = {}
        # subagent -> parent, for the children this process drives: their approvals
        # reach the parent's subscribers too (runtime.agents)
        self._parents: dict[str, str] = {}
        self._closed = False
        #: The parked lease (its owner id: runtime.run.driver PARKED) this process may
        #: take back: the one held by the app that started it (tui.parking).
        self.parked: str | None = None
        #: The storage error that ended this harness (seed 004), once one did: every op
        #: after it is refused with it (runtime.harness.facade: `_store_failed`).
        self.failure: SessionFailedError | None = None
        self.mcp: McpHub | None = None  # the configured MCP servers (runtime.mcp), if any
        #: The conversations this process follows through the store while another
        #: process drives them (runtime.harness.following): their durable events come
        #: from the ledger, in order, and ops that act in the driver are refused.
        self._following: dict[str, Followed] = {}

    def _needs_driver(self, conversation_id: str, what: str) -> None:
        """DrivenElsewhere when this process only follows `conversation_id`: `what` (a
        model, a mode, a compaction) acts in the process that drives it."""
        followed = self._following.get(conversation_id)
        if followed is not None:
            at = followed.driver
            raise DrivenElsewhere(
                f"{what} acts in the process that drives this session ({at.where()}); "
                "this terminal follows it through the store",
                pid=at.pid,
                host=at.host,
                hint="do it in the terminal that drives it; if that process ends, this "
                "terminal takes the session over and can do it here",
            )

    def _check_open(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise HarnessClosed("the harness is closed")

    # --- events -----------------------------------------------------------

    def subscribe(self, conversation_id: str | None = None) -> Subscription:
        sub = Subscription(self, conversation_id)
        self._subscriptions.add(sub)
        return sub

    def followers(self, conversation_id: str) -> int:
        """How many subscriptions follow `conversation_id` (front ends, in any process
        this harness serves)."""
        return sum(sub.conversation_id == conversation_id for sub in self._subscriptions)

    def _publish(self, event: Event) -> None:
        followed = self._following.get(event.conversation_id)
        if followed is not None and hasattr(event, "version"):
            followed.poke()  # (this process's own commit: read back from the ledger, in order)
            return
        self._deliver(event)

    def _deliver(self, event: Event) -> None:
        parent = self._parents.get(event.conversation_id)
        if parent is not None and not isinstance(event, ToolCallUpdated):
            parent = None  # of a child, its parent's screen hears only its calls (approvals)
        for sub in self._subscriptions:
            if (
                sub.conversation_id is None
                or sub.conversation_id == event.conversation_id
                or sub.conversation_id == parent
            ):
                sub._put(event)
        if isinstance(event, RunUpdated) and event.run.terminal:
            for future in self._run_waiters.pop(event.run.id, []):
                if not future.done():
                    future.set_result(event.run)

    def prepare(self, conversation: Conversation) -> None:
        """A new conversation that is not committed until its first input: `snapshot`
        shows it empty, `drive` waits for it, and the first `submit` commits it together
        with that input. Quitting before then leaves nothing in the store."""
        self._prepared[conversation.id] = conversation

    async def update_settings(self, conversation_id: str, **changes: Any) -> Conversation:
        def build(tx: Tx) -> Conversation:
            conv = tx.conversation()
            updated = conv.but(settings={**conv.settings, **changes})
            tx.update_conversation(updated)
            return updated

        await self.store.transact(conversation_id, build, publish=self._publish)
        return await self.store.get_conversation(conversation_id)

    async def snapshot(self, conversation_id: str, last: int | None = None) -> ConversationView:
        """The stored state, with what this process streamed but has not committed yet;
        `last`: a view of the session's end, its last `last` entries (see
        `ConversationView.earlier`)."""
        prepared = self._prepared.get(conversation_id)
        if prepared is not None and not await self.store.exists(conversation_id):
            return ConversationView(conversation=prepared, version=0)
        view = await self._snapshot(conversation_id, last)
        asking = await self.store.read(lambda db: pending_child_calls(db, conversation_id))
        return msgspec.structs.replace(view, child_calls=asking) if asking else view

    async def _snapshot(self, conversation_id: str, last: int | None) -> ConversationView:
        snap = await self.store.snapshot(conversation_id, last)
        driver = self._drivers.get(conversation_id)
        if driver is None or not driver.live:
            return view_from_snapshot(snap)
        entries = list(snap.entries)
        cursors: dict[str, StreamCursor] = {}
        for run_id, live in driver.live.items():
            if live.seq:
                cursors[run_id] = StreamCursor(live.epoch, live.seq)
            for i in range(len(entries) - 1, -1, -1):
                if entries[i].id == live.entry_id:
                    data, thought = entries[i].data, live.reasoning.text
                    if thought:  # what was streamed, checkpointed or not
                        data = {**data, "reasoning": thought}
                    entries[i] = entries[i].but(text=live.text, data=data)
                    break
        return view_from_snapshot(
            msgspec.structs.replace(snap, entries=tuple(entries)),
            cursors,
        )
