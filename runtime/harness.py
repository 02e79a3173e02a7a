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
import contextlib
import dataclasses
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runtime import effects, failpoints, sessions, transfer
from runtime.aio import wait_until
from runtime.answers import Answer, answer_tx
from runtime.approvals import ApprovalMode
from runtime.calls import interrupt_tx
from runtime.catalog import ModelInfo
from runtime.compaction import DEFAULT_RESERVE, CompactionSettings, Compactor
from runtime.config import Config
from runtime.driver import Driver, DriverConfig, lease_live, new_run
from runtime.errors import (
    BastionError,
    EmptyInput,
    HarnessClosed,
    NotPending,
    RequestKeyReused,
    StoreError,
    UnfinishedWork,
    UnknownEntry,
    UnknownRun,
)
from runtime.events import DurableEvent, Event, InboxUpdated, RunUpdated
from runtime.fulltext import SearchHit
from runtime.ids import uuid7
from runtime.instructions import ProjectInstructions, load_instructions
from runtime.loop import LoopSettings, user_entry
from runtime.providers.base import Provider
from runtime.records import (
    Conversation,
    Entry,
    InboxItem,
    InboxMode,
    InboxState,
    Run,
    SessionSummary,
    ToolCallRecord,
)
from runtime.rules import (
    BadRule,
    Rule,
    Scope,
    command_rule,
    folder_parts,
    propose,
    unique,
)
from runtime.serve import AttachServer, start_server
from runtime.settings import ProjectRules, RuleBook, load_project_rules
from runtime.store import Store, remove_artifacts, request_digest
from runtime.toolbox import Toolbox
from runtime.tx import Tx
from runtime.usage import UsageSummary, usage_summary
from runtime.views import ConversationView, StreamCursor, view_from_snapshot

log = logging.getLogger(__name__)
ResolveModel = Callable[[str], tuple[Provider, str]]
ToolboxFactory = Callable[[Conversation], Toolbox | None]


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


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What this process runs a conversation with: the model spec and the approval mode."""

    model: str
    approval_mode: str


class Harness:
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
        self._servers: dict[str, AttachServer] = {}  # attach sockets of driven conversations
        self._subscriptions: set[Subscription] = set()
        self._run_waiters: dict[str, list[asyncio.Future[Run]]] = {}
        self._deferred: dict[str, dict[str, Any]] = {}
        self._prepared: dict[str, Conversation] = {}
        self._settings: dict[str, SessionSettings] = {}
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
        config: Config | None = None,
    ) -> Harness:
        """`config` supplies the model catalog overrides, output caps and compaction
        settings (runtime.config); without it, the catalog's defaults."""
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
            config,
        )

    async def close(self) -> None:
        """Stop every driver (their leases released), close providers and the store.
        A failing store (locked, corrupt) is reported in the log, never a hang."""
        if self._closed:
            return
        self._closed = True
        for driver in list(self._drivers.values()):
            try:
                await driver.stop()
            finally:
                if driver.config.toolbox is not None:
                    driver.config.toolbox.close()
        self._drivers.clear()
        for server in list(self._servers.values()):
            await server.close()
        self._servers.clear()
        for provider, _ in self._providers.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        for sub in list(self._subscriptions):
            sub.close()
        try:
            await self.store.close()
        except StoreError as exc:
            log.warning("closing the store: %s", exc)

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
        """An empty conversation, committed now. Front ends prefer `submit(create=...)`,
        which commits a new conversation together with its first prompt."""
        self._check_open()
        conv, _ = await self.store.create_conversation(
            new_conversation(cwd, settings=settings, title=title, conversation_id=conversation_id),
            publish=self._publish,
        )
        return conv

    def prepare(self, conversation: Conversation) -> None:
        """A new conversation that is not committed until its first input: `snapshot`
        shows it empty, `drive` waits for it, and the first `submit` commits it together
        with that input. Quitting before then leaves nothing in the store."""
        self._prepared[conversation.id] = conversation

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

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Conversations whose entries match `query` (full-text, ranked by bm25), each
        with its best entry and a snippet. SearchQueryError for an empty query; text
        that is not FTS5 syntax is searched as plain words."""
        return await self.store.search(query, limit)

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]:
        """The newest conversations (every directory) with their entry counts, for a picker."""
        return await self.store.session_summaries(limit)

    async def search_conversations(self, query: str) -> list[Conversation]:
        """The conversations of `search(query)`, best first."""
        return [hit.conversation for hit in await self.store.search(query)]

    async def fork(self, conversation_id: str, at_entry: str | None = None) -> Conversation:
        """A new conversation (fresh uuid7) sharing the history of `conversation_id` up to
        and including entry `at_entry` (None: all of it), created in one transaction;
        the source is untouched. UnknownEntry if the entry is not there."""
        self._check_open()

        def at(entries: list[Entry]) -> int:
            return sessions.fork_position(entries, at_entry, conversation_id)

        return await self.store.fork_conversation(
            conversation_id, uuid7(), at, publish=self._publish
        )

    async def rewind(self, conversation_id: str, entry_id: str) -> sessions.Rewound:
        """Fork just before the user message `entry_id`, and hand that message back for
        the prompt. Files are not touched: `restore_plan` says what can be undone."""
        self._check_open()
        found: list[Entry] = []

        def at(entries: list[Entry]) -> int:
            found.append(sessions.rewind_position(entries, entry_id, conversation_id))
            return found[0].position - 1

        conv = await self.store.fork_conversation(
            conversation_id, uuid7(), at, publish=self._publish
        )
        return sessions.Rewound(conv, found[0].text, conversation_id, entry_id)

    async def restore_plan(self, conversation_id: str, entry_id: str) -> effects.RestorePlan:
        """What putting the workspace back to how it was before entry `entry_id` would
        do: the files it can restore or remove (from the calls' records), and the exact
        changes it cannot undo (a command outside git, a file changed by one, a call
        with no record). Nothing is changed; `restore(plan)` does it."""
        self._check_open()
        conv = await self.store.get_conversation(conversation_id)

        def read(db: Any) -> list[effects.SpanCall]:
            row = db.execute(
                "SELECT position FROM entries WHERE id = ? AND conversation_id = ?",
                (entry_id, conversation_id),
            ).fetchone()
            if row is None:
                raise UnknownEntry(
                    f"conversation {conversation_id} has no entry {entry_id}",
                    hint=f"list its entries with `bastion export {conversation_id}`",
                )
            return effects.read_span(db, conversation_id, int(row[0]))

        span = await self.store.read(read)
        return await asyncio.to_thread(effects.plan, conversation_id, entry_id, conv.cwd, span)

    async def restore(self, plan: effects.RestorePlan) -> effects.RestoreReport:
        """Carry out `plan` through the workspace's tools (no path outside it is written);
        what could not be put back is reported, with what the plan could not undo."""
        self._check_open()
        return await asyncio.to_thread(effects.restore, plan)

    async def export(self, conversation_id: str) -> dict[str, Any]:
        """The conversation as an export document (JSON-able): its records as stored and
        its ledger events. `import_conversation` reads it back."""
        view = await self.snapshot(conversation_id)
        events: list[DurableEvent] = []
        while True:
            batch = await self.store.ledger(conversation_id, events[-1].version if events else 0)
            if not batch:
                return transfer.export_document(view, events)
            events += batch

    async def import_conversation(self, text: str) -> Conversation:
        """A new conversation (fresh ids throughout) from an export document's text,
        validated whole first: ImportRefused, and nothing written, for a malformed
        file or one from a newer bastion."""
        self._check_open()
        conv, history = transfer.parse_document(text, uuid7(), time.time())
        created, _ = await self.store.create_conversation(
            conv, lambda tx: sessions.copy_history(tx, history), publish=self._publish
        )
        return await self.store.get_conversation(created.id)

    async def update_settings(self, conversation_id: str, **changes: Any) -> Conversation:
        def build(tx: Tx) -> Conversation:
            conv = tx.conversation()
            updated = conv.but(settings={**conv.settings, **changes})
            tx.update_conversation(updated)
            return updated

        await self.store.transact(conversation_id, build, publish=self._publish)
        return await self.store.get_conversation(conversation_id)

    async def delete_conversation(self, conversation_id: str, *, force: bool = False) -> None:
        """Delete a conversation and everything of it (spilled output too); its id is
        never used again. Refused (UnfinishedWork) with work in progress unless `force`."""
        self._check_open()
        ttl = self.lease_ttl
        await self.store.delete_conversation(
            conversation_id, force=force, live=lambda lease: lease_live(lease, ttl)
        )
        remove_artifacts(self.home / "artifacts" / conversation_id)

    async def snapshot(self, conversation_id: str) -> ConversationView:
        """The stored state, with what this process streamed but has not committed yet."""
        prepared = self._prepared.get(conversation_id)
        if prepared is not None and not await self.store.exists(conversation_id):
            return ConversationView(conversation=prepared, version=0)
        snap = await self.store.snapshot(conversation_id)
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
            dataclasses.replace(snap, entries=tuple(entries)),
            cursors,
        )

    async def ledger(self, conversation_id: str, after: int = 0) -> list[DurableEvent]:
        return await self.store.ledger(conversation_id, after)

    async def project_instructions(self, cwd: str) -> ProjectInstructions:
        """The AGENTS.md / CLAUDE.md files a run in `cwd` reads, and the text they make
        (see runtime.instructions); for status lines and first-run notes."""
        return await asyncio.to_thread(load_instructions, cwd)

    # --- driving ----------------------------------------------------------

    def resolve_model(self, spec: str) -> tuple[Provider, str]:
        """Provider and model name for `spec` (cached); raises ConfigError."""
        if spec not in self._providers:
            if self._resolve_model is None:
                raise BastionError("this harness was opened without a model resolver")
            self._providers[spec] = self._resolve_model(spec)
        return self._providers[spec]

    async def usage(self, conversation_id: str) -> UsageSummary:
        """Token counts (with provenance) and cost per run, per model and in total,
        and how full the context window was at the newest request."""
        return usage_summary(await self.snapshot(conversation_id))

    def compaction_settings(self) -> CompactionSettings:
        """The reserve from config, and the `compact_model`'s provider when one is set."""
        settings = CompactionSettings(
            reserve_tokens=self.config.compact_reserve_tokens or DEFAULT_RESERVE
        )
        spec = self.config.compact_model
        if spec:
            provider, model = self.resolve_model(spec)
            settings = replace(
                settings, summary_provider=provider, summary_model=model, summary_spec=spec
            )
        return settings

    async def compact(self, conversation_id: str, instructions: str | None = None) -> Entry | None:
        """Summarise the conversation's older whole turns now (keeping roughly the last
        20k tokens verbatim); the summary entry, or None when there is nothing whole to
        compact yet. Raises CompactionFailed (the conversation is then as it was)."""
        self._check_open()
        conv = await self.store.get_conversation(conversation_id)
        driver = self._drivers.get(conversation_id)
        spec = driver.config.model_info.spec if driver is not None else conv.agent.model
        provider, model = self.resolve_model(spec)
        info = self.model_info(spec)
        token = driver.token if driver is not None else None

        async def commit(build: Callable[[Tx], Any]) -> Any:
            return await self.store.transact(
                conversation_id, build, token=token, publish=self._publish
            )

        latest = await self.store.latest_run(conversation_id)
        active = latest.id if latest is not None and not latest.terminal else None
        compactor = Compactor(
            self.store, conversation_id, commit, provider, model, info,
            info.context_window, self.compaction_settings(),
        )  # fmt: skip
        return await compactor.compact(instructions or None, active_run_id=active)

    def model_info(self, spec: str) -> ModelInfo:
        """What is known of model `spec` ("PROVIDER/NAME"): context window, output limit,
        prices, images, tools; `known` is False when these are conservative guesses."""
        return self.config.model_info(spec)

    def output_cap(self, spec: str) -> int:
        """The `max_tokens` every request to `spec` carries (config, catalog, 8192)."""
        return self.config.output_cap(spec)

    async def drive(
        self,
        conversation_id: str,
        *,
        interactive: bool = True,
        on_refusal: Callable[[str, str], None] | None = None,
        approval_mode: str | None = None,
        model: str | None = None,
        allow: Sequence[str] = (),
    ) -> Driver | None:
        """Become this conversation's driver: take the lease, recover, run its work.

        `approval_mode` and `model` hold for this process only (a flag applies to its
        own invocation); without them, the conversation's stored settings. `allow`
        holds command prefixes that run without asking, for this process only. A
        conversation not created yet is driven as soon as `submit(create=...)`
        commits it; this returns None then."""
        self._check_open()
        if conversation_id in self._drivers:
            return self._drivers[conversation_id]
        options = {
            "interactive": interactive,
            "on_refusal": on_refusal,
            "approval_mode": approval_mode,
            "model": model,
            "allow": tuple(command_rule(a, Scope.INVOCATION) for a in allow),
        }
        if not await self.store.exists(conversation_id):
            self._deferred[conversation_id] = options
            prepared = self._prepared.get(conversation_id)
            agent = prepared.agent if prepared is not None else None
            self._settings[conversation_id] = SessionSettings(
                model or (agent.model if agent else ""),
                ApprovalMode.parse(
                    approval_mode or (agent.approval_mode if agent else "") or "ask"
                ).value,
            )
            return None
        return await self._start_driver(conversation_id, **options)  # type: ignore[arg-type]

    async def _start_driver(
        self,
        conversation_id: str,
        *,
        interactive: bool,
        on_refusal: Callable[[str, str], None] | None,
        approval_mode: str | None,
        model: str | None,
        allow: tuple[Rule, ...] = (),
    ) -> Driver:
        conv = await self.store.get_conversation(conversation_id)
        agent = conv.agent
        settings = self._settings.get(conversation_id)
        spec = (settings.model if settings else "") or model or agent.model
        mode = ApprovalMode.parse(
            settings.approval_mode if settings else approval_mode or agent.approval_mode or "ask"
        )
        provider, model_name = self.resolve_model(spec)
        toolbox = self._toolbox_factory(conv) if self._toolbox_factory else None
        config = DriverConfig(
            provider=provider,
            model=model_name,
            model_info=self.model_info(spec),
            output_cap=self.output_cap(spec),
            toolbox=toolbox,
            approval_mode=mode,
            interactive=interactive,
            loop=self.loop_settings,
            lease_ttl=self.lease_ttl,
            on_refusal=on_refusal,
            compaction=self.compaction_settings(),
            rules=RuleBook(
                ProjectRules(conv.cwd),
                allow,
                getattr(toolbox, "resolve_path", None) or folder_parts,
            ),
        )
        driver = Driver(self.store, conversation_id, self.owner, self.epoch, self._publish, config)
        try:
            await driver.start()
        except BaseException:
            if toolbox is not None:
                toolbox.close()
            raise
        self._drivers[conversation_id] = driver
        server = await start_server(self, conversation_id)
        if server is not None:
            self._servers[conversation_id] = server
        self._settings[conversation_id] = SessionSettings(spec, mode.value)
        return driver

    # --- this process's settings ------------------------------------------

    async def session_settings(self, conversation_id: str) -> SessionSettings:
        """The model and approval mode this process runs `conversation_id` with (the
        stored ones when it does not drive it)."""
        settings = self._settings.get(conversation_id)
        if settings is not None:
            return settings
        conv = self._prepared.get(conversation_id)
        if conv is None:
            conv = await self.store.get_conversation(conversation_id)
        return SessionSettings(conv.agent.model, conv.agent.approval_mode or "ask")

    async def set_approval_mode(self, conversation_id: str, mode: str) -> SessionSettings:
        """Switch the approval mode for this process (never stored: a mode holds only
        where it was chosen). Holds from the next tool call. ConfigError if unknown."""
        parsed = ApprovalMode.parse(mode)
        current = await self.session_settings(conversation_id)
        settings = SessionSettings(current.model, parsed.value)
        self._settings[conversation_id] = settings
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.reconfigure(approval_mode=parsed)
        return settings

    async def set_model(self, conversation_id: str, spec: str) -> SessionSettings:
        """Switch the conversation's model (stored with it, so a resume keeps it); holds
        from the next run. ConfigError, with nothing changed, if `spec` does not resolve."""
        provider, model_name = self.resolve_model(spec)
        current = await self.session_settings(conversation_id)
        prepared = self._prepared.get(conversation_id)
        if prepared is not None:
            self._prepared[conversation_id] = prepared.but(
                settings={**prepared.settings, "model": spec}
            )
        elif await self.store.exists(conversation_id):
            await self.update_settings(conversation_id, model=spec)
        settings = SessionSettings(spec, current.approval_mode)
        self._settings[conversation_id] = settings
        deferred = self._deferred.get(conversation_id)
        if deferred is not None:
            deferred["model"] = spec
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            driver.reconfigure(provider=provider, model=model_name)
        return settings

    async def new_session(self, conversation_id: str) -> Conversation:
        """A new conversation like `conversation_id` (cwd, model, instructions), prepared
        (committed with its first prompt) and driven as this process drives that one
        (same approval mode and model); that one's driver is released. Refused
        (UnfinishedWork, nothing changed) while it has a run or queued input."""
        self._check_open()
        like = self._prepared.get(conversation_id)
        if like is None:
            like = await self.store.get_conversation(conversation_id)
            if await self.store.unfinished(conversation_id):
                raise UnfinishedWork(
                    "this conversation still has work in progress",
                    hint="wait for it to finish, or press Esc to interrupt it first",
                )
        settings = await self.session_settings(conversation_id)
        driver = self._drivers.get(conversation_id)
        deferred = self._deferred.get(conversation_id)
        conv = new_conversation(like.cwd, settings={**like.settings, "model": settings.model})
        self.prepare(conv)
        if driver is not None:
            deferred = {"interactive": driver.config.interactive}
            deferred["on_refusal"] = driver.config.on_refusal
        if deferred is not None:
            await self.drive(
                conv.id,
                interactive=bool(deferred["interactive"]),
                on_refusal=deferred["on_refusal"],
                approval_mode=settings.approval_mode,
                model=settings.model,
            )
        await self.release(conversation_id)
        self._deferred.pop(conversation_id, None)
        self._prepared.pop(conversation_id, None)
        return conv

    async def switch_session(self, conversation_id: str, to: str) -> Conversation:
        """Drive stored conversation `to` as this process drives `conversation_id` (same
        interactivity), then release that one. Refused (UnfinishedWork, nothing changed)
        while `conversation_id` has work in progress; ConversationBusy if another process
        drives `to`; UnknownConversation if there is no such conversation."""
        self._check_open()
        target = await self.store.get_conversation(to)
        if conversation_id not in self._prepared and await self.store.unfinished(conversation_id):
            raise UnfinishedWork(
                "this conversation still has work in progress",
                hint="wait for it to finish, or press Esc to interrupt it first",
            )
        driver = self._drivers.get(conversation_id)
        options = self._deferred.get(conversation_id) or {}
        interactive = driver.config.interactive if driver else options.get("interactive", True)
        on_refusal = driver.config.on_refusal if driver else options.get("on_refusal")
        if to != conversation_id:
            await self.drive(to, interactive=bool(interactive), on_refusal=on_refusal)
            await self.release(conversation_id)
            self._deferred.pop(conversation_id, None)
            self._prepared.pop(conversation_id, None)
        return target

    async def set_defaults(
        self, conversation_id: str, *, model: str | None = None, approval_mode: str | None = None
    ) -> None:
        """Change the model and/or approval mode this process drives the conversation with,
        from its next run on (for a live config change; nothing is stored). A conversation
        not committed yet also gets `model` stored with its first prompt. ConfigError for an
        unknown model or mode, and then nothing changes."""
        self._check_open()
        mode = ApprovalMode.parse(approval_mode) if approval_mode is not None else None
        resolved = self.resolve_model(model) if model is not None else None
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            if resolved is not None:
                driver.config.provider, driver.config.model = resolved
            if mode is not None:
                driver.config.approval_mode = mode
        deferred = self._deferred.get(conversation_id)
        if deferred is not None:
            if model is not None:
                deferred["model"] = model
            if mode is not None:
                deferred["approval_mode"] = mode.value
        prepared = self._prepared.get(conversation_id)
        if prepared is not None and model is not None:
            settings = {**prepared.settings, "model": model}
            self._prepared[conversation_id] = dataclasses.replace(prepared, settings=settings)
        current = self._settings.get(conversation_id)
        if current is not None:  # what session_settings (the status line) reports
            self._settings[conversation_id] = SessionSettings(
                model if model is not None else current.model,
                mode.value if mode is not None else current.approval_mode,
            )

    def driver(self, conversation_id: str) -> Driver | None:
        return self._drivers.get(conversation_id)

    async def release(self, conversation_id: str) -> None:
        self._settings.pop(conversation_id, None)  # driven again: its own model and mode
        server = self._servers.pop(conversation_id, None)
        if server is not None:
            await server.close()
        driver = self._drivers.pop(conversation_id, None)
        if driver is not None:
            await driver.stop()
            if driver.config.toolbox is not None:
                driver.config.toolbox.close()

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
    ) -> InboxItem:
        """Admit input. Idle: a user entry and a queued run; busy: a queued inbox item.

        With `create`, a conversation that does not exist yet is committed in the same
        transaction as this first input (so no conversation is ever left empty). A
        request key is admitted once across all conversations: the same key with the
        same input returns the item it admitted; with other input it is refused
        (RequestKeyReused)."""
        self._check_open()
        _check_text(text)

        def admit(tx: Tx) -> InboxItem:
            return _admit(tx, text, request_key, mode)

        create = create or self._prepared.get(conversation_id)
        if create is not None and not await self.store.exists(conversation_id):
            _, item = await self.store.create_conversation(
                create.but(id=conversation_id, title=create.title or _title_from(text)),
                admit,
                publish=self._publish,
            )
            assert item is not None
            self._prepared.pop(conversation_id, None)
            failpoints.hit("admitted")
            options = self._deferred.pop(conversation_id, None)
            if options is not None:
                await self._start_driver(conversation_id, **options)
            return item
        item = await self.store.transact(conversation_id, admit, publish=self._publish)
        failpoints.hit("admitted")
        driver = self._drivers.get(item.conversation_id)
        if driver is not None:
            driver.wake()
        return item

    async def withdraw(self, conversation_id: str, item_id: str) -> bool:
        """Withdraw a queued steer or follow-up: false (nothing changed) if it was placed
        first, or withdrawn already."""
        done = await self.store.transact(
            conversation_id,
            lambda tx: tx.transition_inbox(item_id, InboxState.WITHDRAWN),
            publish=self._publish,
        )
        return done is not None

    async def respond(
        self,
        conversation_id: str,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
    ) -> tuple[Rule, ...]:
        """Answer a pending approval: committed, then the driver woken. NotPending if the
        approval was answered already or its call was settled (an interrupt won).

        `always` ("session" or "project") approves and saves the rules
        `proposed_rules` names, in the transaction that approves the call (a project
        rule goes to `.bastion/settings.toml` inside it: a failed write approves
        nothing); other pending calls those rules cover are approved with it.
        `message` goes with a denial to the model. Returns the rules saved."""
        if always is not None and not approve:
            raise BadRule("a denial cannot save a rule", hint="answer always only to approve")
        if message is not None and approve:
            raise BadRule("a message goes with a denial", hint="deny with the message instead")
        scope = Scope(always) if always is not None else None
        if scope == Scope.INVOCATION:
            raise BadRule(
                "save a rule for the session or the project", hint="scope: session|project"
            )
        root = (await self.store.get_conversation(conversation_id)).cwd if scope else ""
        standing = self._standing_rules(conversation_id, root)

        def build(tx: Tx) -> tuple[list[ToolCallRecord], tuple[Rule, ...]]:
            return answer_tx(tx, tool_call_id, approve, Answer(scope, message, standing, root))

        answered, saved = await self.store.transact(conversation_id, build, publish=self._publish)
        if not answered:
            raise NotPending(
                f"tool call {tool_call_id} is not waiting for approval",
                hint="it was answered already, or the run was interrupted",
            )
        driver = self._drivers.get(conversation_id)
        if driver is not None:
            for call in answered:
                driver.decided(call.id)
        return saved

    async def proposed_rules(
        self, conversation_id: str, tool_call_id: str, scope: str = "session"
    ) -> tuple[Rule, ...]:
        """The rules answering "always" would save for a pending call (what every front
        end shows before saving): () when no rule can cover it."""
        call = await self.store.tool_call(tool_call_id)
        if call is None or call.conversation_id != conversation_id:
            return ()
        conv = await self.store.get_conversation(conversation_id)
        session = await self.store.session_rules(conversation_id)
        have = [*session, *self._standing_rules(conversation_id, conv.cwd)]
        return propose(call.name, call.arguments, Scope(scope), have)

    async def rules(self, conversation_id: str) -> tuple[Rule, ...]:
        """Every rule that applies to the conversation: its session rules, this
        process's `--allow` rules and the project's (`.bastion/settings.toml`)."""
        conv = await self.store.get_conversation(conversation_id)
        session = await self.store.session_rules(conversation_id)
        return unique([*session, *self._standing_rules(conversation_id, conv.cwd)])

    def _standing_rules(self, conversation_id: str, root: str) -> tuple[Rule, ...]:
        driver = self._drivers.get(conversation_id)
        if driver is not None and driver.config.rules is not None:
            return driver.config.rules.standing()
        return load_project_rules(root) if root else ()

    async def interrupt(self, conversation_id: str) -> Interruption:
        """Interrupt the active run: the request is committed first (so any process can
        make it), queued inputs are withdrawn and handed back, then the run is
        cancelled by whichever process drives it."""

        run, withdrawn = await self.store.transact(
            conversation_id, interrupt_tx, publish=self._publish
        )
        driver = self._drivers.get(conversation_id)
        if run is not None and driver is not None:
            if not driver.cancel_run(run.id):
                driver.wake()  # a queued run: the driver finishes it as interrupted
            await driver.settled(run.id)
        return Interruption(run.id if run is not None else None, tuple(withdrawn))

    # --- waiting ----------------------------------------------------------

    async def wait(self, item_id: str, conversation_id: str, *, poll: float = 1.0) -> Run:
        """Wait until the run of inbox item `item_id` ends; returns that run."""
        while True:
            item = await self.store.inbox_item(item_id)
            if item is None:
                raise UnknownRun(f"no submission {item_id} in conversation {conversation_id}")
            if item.state == InboxState.WITHDRAWN:
                raise UnknownRun(f"submission {item_id} was withdrawn")
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

        return await self.store.read(read)

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


@dataclass(frozen=True, slots=True)
class Interruption:
    """What `Harness.interrupt` did: the run it asked to stop (None if none was active)
    and the queued inputs it withdrew, oldest first, for the prompt to take back."""

    run_id: str | None
    withdrawn: tuple[InboxItem, ...] = ()

    def __bool__(self) -> bool:
        return self.run_id is not None


def new_conversation(
    cwd: str,
    *,
    settings: dict[str, Any] | None = None,
    title: str = "",
    conversation_id: str | None = None,
) -> Conversation:
    stamp = time.time()
    return Conversation(conversation_id or uuid7(), title, cwd, dict(settings or {}), stamp, stamp)


def _check_text(text: str) -> None:
    if not text.strip():
        raise EmptyInput("the prompt is empty", hint="type something for the agent to do")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise EmptyInput(
            "the prompt is not valid UTF-8 text",
            hint="pass the prompt as UTF-8 (check the terminal's or the file's encoding)",
        ) from None


def _admit(tx: Tx, text: str, request_key: str | None, mode: InboxMode) -> InboxItem:
    """Inside one transaction: the admission check, then the user entry and a queued run
    (idle) or a queued inbox item (busy)."""
    digest = request_digest(text, mode)
    if request_key is not None:
        rows = tx.rows(
            "SELECT inbox_id, digest, conversation_id FROM admissions WHERE request_key = ?",
            (request_key,),
        )
        if rows:
            inbox_id, known, owner = rows[0]
            if known and known != digest:
                raise RequestKeyReused(
                    f"request key {request_key!r} was already used for a different prompt",
                    hint="use a new request key for new input",
                )
            found = tx.inbox_item(inbox_id)
            assert found is not None, f"admission {request_key} without its item in {owner}"
            return found
    item = InboxItem(
        uuid7(), tx.conversation_id, mode, text, InboxState.QUEUED, time.time(), request_key
    )
    if request_key is not None:
        tx.execute(
            "INSERT INTO admissions (request_key, conversation_id, inbox_id, digest, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (request_key, tx.conversation_id, item.id, digest, item.created_at),
        )
    if tx.active_run() is not None or tx.queued_inbox():
        return tx.insert_inbox(item)
    # Idle: admitted straight into a new run (the item is placed as it is inserted).
    run = new_run(tx.conversation_id, item.id)
    entry = user_entry(item, run.id)
    placed = tx.insert_inbox(item.but(state=InboxState.PLACED, run_id=run.id, entry_id=entry.id))
    tx.add_entry(entry)
    tx.insert_run(run)
    conv = tx.conversation()
    if not conv.title:
        tx.update_conversation(conv.but(title=_title_from(text)))
    return placed


def _title_from(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
