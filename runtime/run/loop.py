"""The model loop: one run, from its admitted input to its final answer.

Durable order per turn: assistant entry created (streaming) → text and
reasoning checkpointed as chunks, on arrival once `checkpoint_interval` has
passed and on a timer during pauses, so nothing shown stays uncommitted longer
than the interval → completion committed with the tool-call intents → each
call (runtime.run.calls) → queued steers placed → next model request.

The run reads the conversation once, when it starts, and then keeps its own
list of entries current from its own commits: while it holds the lease no
other process adds entries, so a long conversation costs one read per run,
not one per turn. Every commit goes through `commit`, which lets a commit
that began land even if the run is cancelled meanwhile; events are published
only after their commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from runtime.context.catalog import cost_of
from runtime.context.compaction import Compactor, exceeds
from runtime.context.images import IMAGE_SUFFIXES, max_side_for, prompt_images
from runtime.context.instructions import load_instructions
from runtime.context.messages import ImagePolicy, build_messages
from runtime.context.tokens import estimate_usage_async
from runtime.model.errors import BastionError
from runtime.model.events import AttemptReset, ReasoningDelta, TextDelta
from runtime.model.ids import now, uuid7
from runtime.model.llm import (
    ImagePart,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    StreamEnd,
    TextChunk,
    ToolCallChunk,
    Usage,
    UsageReport,
)
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    Conversation,
    Entry,
    EntryKind,
    EntryStatus,
    InboxMode,
    Run,
    RunState,
    ToolCallRecord,
)
from runtime.model.results import Quality
from runtime.run.budget import start_deadline, stop_before_request
from runtime.run.compacting import BACKGROUND_AT, Gate, RunCompaction
from runtime.run.deps import LoopDeps
from runtime.run.placing import place_item
from runtime.run.resumed import answered_already
from runtime.run.spend import AttemptSpend, Spent
from runtime.run.turnstate import TurnState, run_error, worse
from runtime.run.urgent import BY_USER, URGENT_REASON, ending_reason, urgent_waiting
from runtime.store import failpoints
from runtime.store.database import Store
from runtime.store.sessions import children_cost, session_cost
from runtime.store.surrogates import valid_stream
from runtime.store.tx import Tx

log = logging.getLogger(__name__)
T = TypeVar("T")


class RunAborted(Exception):
    """The run cannot go on; carries the error recorded on it."""

    def __init__(self, error: dict[str, Any], usage: dict[str, Any] | None = None) -> None:
        super().__init__(error.get("message", "run failed"))
        self.error = error
        self.usage = usage  # what the failed requests used, when they used anything


class RunInterrupted(Exception):
    """An interrupt was committed for this run (by any process): stop at this step."""


class RunLost(Exception):
    """The run was ended by someone else (it is no longer in a state this step expects)."""


class RunExecutor:
    def __init__(self, deps: LoopDeps, conversation_id: str) -> None:
        from runtime.run.calls import CallRunner  # the two halves of a run refer to each other

        self.deps = deps
        self.conversation_id = conversation_id
        self.interrupting = False
        self.cut: tuple[ModelRequest, TurnState, Spent, int] | None = None  # see _spend
        self.stop_error: dict[str, Any] | None = None  # the budget limit that stops the run
        self.stop_reason: str | None = None  # why else it stops early (runtime.run.urgent)
        self.conversation: Conversation | None = None
        self.project_instructions = ""
        self.entries: list[Entry] = []
        self._positions: dict[str, int] = {}
        self._inflight: set[asyncio.Future[Any]] = set()  # commits under way (calls overlap)
        self.lock = asyncio.Lock()  # one stream step or checkpoint at a time
        self._last_checkpoint = 0.0
        self._turns_streamed = 0  # in this process: names the per-turn crash points
        self.calls = CallRunner(self)
        self._prompt_images: dict[str, tuple[ImagePart, ...]] = {}
        self.compactor = Compactor(
            deps.store, conversation_id, self.commit, deps.provider, deps.model,
            deps.model_info, deps.model_info.context_window, deps.compaction,
        )  # fmt: skip
        self.leftover: asyncio.Task[Entry | None] | None = None  # see `execute`'s end
        self.compaction = RunCompaction(
            self.compactor, conversation_id, deps.publish, deps.live.epoch, self.next_seq,
            self.settle_inflight,
        )  # fmt: skip

    # --- commits ----------------------------------------------------------

    @property
    def store(self) -> Store:
        """The store this run commits to (runtime.hooks.context.RunContext)."""
        return self.deps.store

    async def commit(self, build: Callable[[Tx], T], after: Callable[[T], None] | None = None) -> T:
        """Run `build` in one fenced transaction; `after` runs when it has committed.

        A cancellation (interrupt, shutdown) arriving mid-commit still lets the
        commit land, so whatever the loop remembers about committed state must
        change in `after`, never after the await.
        """
        future = asyncio.ensure_future(
            self.deps.store.transact(
                self.conversation_id,
                build,
                token=self.deps.token,
                publish=self.deps.publish,
                after=after,
            )
        )
        for done in [f for f in self._inflight if f.done()]:
            self._inflight.discard(done)
            if not done.cancelled():
                done.exception()  # retrieved; its caller's own error path reported it
        self._inflight.add(future)
        return await asyncio.shield(future)

    async def settle_inflight(self) -> None:
        """After a cancellation: let the commits that were under way land before cleaning up."""
        under_way, self._inflight = self._inflight, set()
        pending = [f for f in under_way if not f.done()]
        if pending:
            await asyncio.wait(pending)
        for task in under_way:
            if not task.cancelled():
                task.exception()  # retrieved here; the caller's own error path reports failures

    def track(self, entry: Entry | None) -> None:
        """Keep the run's copy of the conversation current with an entry it committed."""
        if entry is None:
            return
        at = self._positions.get(entry.id)
        if at is None:
            self._positions[entry.id] = len(self.entries)
            self.entries.append(entry)
        else:
            self.entries[at] = entry

    def next_seq(self) -> int:
        """The next transient seq of this run in this process (1, 2, 3, ...)."""
        self.deps.live.seq += 1
        return self.deps.live.seq

    async def transition(
        self, run: Run, from_states: tuple[str, ...] = ACTIVE_RUN_STATES, **changes: Any
    ) -> Run:
        updated = await self.commit(lambda tx: tx.transition_run(run.id, from_states, **changes))
        if updated is None:
            raise RunLost(run.id)
        return updated

    # --- the run ----------------------------------------------------------

    async def execute(self, run: Run) -> Run:
        """Drive `run` to a terminal state. Cancellation: see `interrupting`."""
        deadline = self._start_deadline()
        try:
            run, unfinished = await self._load(run)
            if run.terminal:
                return run
            if run.interrupt_requested:
                self.interrupting = True
                return await self._finish_interrupted(run)
            resumed = run.state != RunState.QUEUED
            if run.state == RunState.QUEUED:
                run = await self.transition(run, (RunState.QUEUED,), state=RunState.RUNNING)
            if self.deps.hooks is not None:  # SessionStart, UserPromptSubmit (runtime.hooks)
                blocked = await self.deps.hooks.run_start(self, run, resumed)
                if blocked is not None:
                    return blocked
            return await self._turns(run, unfinished)
        except asyncio.CancelledError:
            await self.settle_inflight()
            async with self.lock:
                await self.checkpoint()
            if not self.interrupting:
                raise
            return await self._finish_interrupted(run)
        except RunInterrupted:
            self.interrupting = True
            return await self._finish_interrupted(run)
        except RunAborted as aborted:
            return await self._fail(run, aborted.error, aborted.usage)
        except RunLost:
            return await self.deps.store.run(run.id) or run
        except (BastionError, OSError):
            raise  # the store or the lease gave out: the driver's supervisor takes over
        except Exception as exc:  # a provider or tool adapter that broke its contract
            log.warning("run %s failed unexpectedly", run.id, exc_info=True)
            error = {"code": "internal", "message": f"{type(exc).__name__}: {exc}"}
            return await self._fail(run, error)
        finally:
            # A summary still being made in the background: a run that ended on its own
            # hands it on (the driver's next run takes it up); one cut or failing stops it.
            if self.interrupting or sys.exc_info()[0] is not None:
                await self.compaction.close()
            else:
                self.leftover = self.compaction.detach()
            if deadline is not None:
                deadline.cancel()

    def _start_deadline(self) -> asyncio.Task[None] | None:
        """The budget's time limit: the run task is interrupted when it runs out."""

        def expire(error: dict[str, Any]) -> bool:
            if self.interrupting:
                return False  # an interrupt is under way: it ends the run
            self.stop_error, self.interrupting = error, True
            return True

        return start_deadline(self.deps.settings.budget, expire)

    async def _check_budget(self, run: Run) -> None:
        """Before each model request: a turn or cost limit reached stops the run here.
        The cost is the run's and its subagents' (runtime.store.sessions.children_cost):
        a parent's cap holds what the children it started spent. A session cap counts
        the whole session's runs, its subagents' included (session_cost)."""
        budget = self.deps.settings.budget
        children: tuple[float | None, int] = (None, 0)
        session: tuple[float | None, int] = (None, 0)
        if budget.max_cost is not None:
            children = await self.deps.store.read(lambda db: children_cost(db, run.id))
        if budget.session_max_cost is not None:
            conversation_id = self.conversation_id
            session = await self.deps.store.read(lambda db: session_cost(db, conversation_id))
        error = stop_before_request(budget, self.entries, run, children, session)
        if error is not None:
            self.stop_error = error
            raise RunInterrupted(run.id)

    async def _load(self, run: Run) -> tuple[Run, list[ToolCallRecord]]:
        """Read the conversation once: its entries (kept current from here on), this run
        as stored and its unfinished calls. Nothing else of the conversation is read or
        kept (its other runs and inbox cost a long session time and memory)."""
        start = await self.deps.store.run_start(self.conversation_id, run.id)
        self.conversation = start.conversation
        # Read once per run: a model that edits AGENTS.md sees the change next run,
        # and the system prompt stays the same (cacheable) for every request of this one.
        found = await asyncio.to_thread(load_instructions, start.conversation.cwd)
        self.project_instructions = found.text
        for entry in start.entries:
            self.track(entry)
        return start.run or run, [c for c in start.tool_calls if c.unfinished]

    async def _turns(self, run: Run, unfinished: list[ToolCallRecord]) -> Run:
        if unfinished:
            run = await self.calls.run_all(run, unfinished)
            if (stopped := await self._after_round(run, unfinished[0].entry_id)) is not None:
                return stopped
            await self._place_steers(run)
        elif (answer := answered_already(self.entries, run.id)) is not None and (
            done := await self._answer_or_steer(run, answer)  # (a resume after the answer)
        ) is not None:
            return done
        settings = self.deps.settings
        for _ in range(max(settings.max_turns, settings.budget.max_turns or 0)):
            await self.check_interrupt(run)
            await self._check_budget(run)
            entry, calls, run = await self._stream_turn(run)
            if self.deps.hooks is not None:  # PostResponse (runtime.hooks.rounds)
                await self.deps.hooks.post_response(self, run, entry, run.usage)
            if not calls:
                if self.deps.hooks is not None and await self.deps.hooks.stop(self, run, entry):
                    continue  # a Stop hook asked for more: its reason is the next input
                done = await self._answer_or_steer(run, entry)
                if done is not None:
                    return done
                continue
            failpoints.hit("call.intent")
            run = await self.calls.run_all(run, calls)
            if (stopped := await self._after_round(run, entry.id)) is not None:
                return stopped
            await self._place_steers(run)
        raise RunAborted({"code": "max_turns", "message": "the run reached its turn limit"})

    async def _after_round(self, run: Run, entry_id: str) -> Run | None:
        """PostToolBatch hooks once every call of the round of `entry_id` has its result
        (runtime.hooks.rounds): the run, completed, when one stopped it; else None."""
        at = self._positions.get(entry_id)
        if self.deps.hooks is None or at is None:
            return None
        stopped = await self.deps.hooks.post_tool_batch(self, run, self.entries[at])
        if stopped is None:
            return None
        return await self.transition(run, state=RunState.COMPLETED, reason=stopped)

    async def _answer_or_steer(self, run: Run, entry: Entry) -> Run | None:
        """The model answered. Steers queued ahead of any follow-up join this run (one
        more request); otherwise the run completes. One transaction decides."""

        def build(tx: Tx) -> Run | None:
            steers = []
            urgent = urgent_waiting(tx.db, self.conversation_id, run.inbox_id)
            for item in () if urgent else tx.queued_inbox():  # urgent: steers wait
                if item.mode != InboxMode.STEER:
                    break
                steers.append(item)
            if steers:
                for item in steers:
                    self.track(place_item(tx, item, run.id))
                tx.transition_run(run.id, ACTIVE_RUN_STATES, usage=run.usage)
                return None
            return tx.transition_run(
                run.id,
                ACTIVE_RUN_STATES,
                state=RunState.COMPLETED,
                reason="answered",
                result_entry_id=entry.id,
                usage=run.usage,
            )

        return await self.commit(build)

    async def _place_steers(self, run: Run) -> None:
        """After a tool round: every queued steer joins this run, oldest first."""

        def build(tx: Tx) -> list[Entry]:
            placed: list[Entry] = []
            if urgent_waiting(tx.db, self.conversation_id, run.inbox_id):
                return placed  # the run stops next: steers wait (runtime.run.urgent)
            for item in tx.queued_inbox():
                if item.mode == InboxMode.STEER:
                    entry = place_item(tx, item, run.id)
                    self.track(entry)
                    placed += [entry] if entry is not None else []
            return placed

        steers = await self.commit(build)
        failpoints.hit("steers.placed")
        if self.deps.hooks is not None:  # a steer is a prompt too: UserPromptSubmit
            for entry in steers:
                await self.deps.hooks.steer(self, run, entry)

    async def check_interrupt(self, run: Run) -> None:
        """Before each model request: an interrupt committed by any process stops the run
        here, even if the watcher that cancels it has not seen it yet; so does an urgent
        input waiting (runtime.run.urgent): this is the safe point it waits for."""
        fresh = await self.deps.store.run(run.id)
        if fresh is not None and fresh.interrupt_requested:
            raise RunInterrupted(run.id)
        conv, inbox_id = self.conversation_id, run.inbox_id
        if await self.deps.store.read(lambda db: urgent_waiting(db, conv, inbox_id)):
            self.stop_reason = URGENT_REASON
            raise RunInterrupted(run.id)

    # --- one model request ------------------------------------------------

    def _request(self, run: Run) -> ModelRequest:
        assert self.conversation is not None
        specs = self.deps.toolbox.specs() if self.deps.toolbox else ()
        info = self.deps.model_info
        policy = ImagePolicy(info.images, max_side_for(info.spec), info.spec, self._prompt_images)
        messages = build_messages(
            self.conversation,
            self.entries,
            run.id,
            specs,
            project=self.project_instructions,
            policy=policy,
            mode=self.deps.approval_mode.value,
        )
        effort = self.conversation.agent.reasoning_effort or self.deps.settings.reasoning_effort
        return ModelRequest(
            self.deps.model,
            messages,
            specs,
            max_tokens=self.deps.output_cap,
            session_id=self.conversation_id,
            reasoning_effort=effort or None,
        )

    async def _load_prompt_images(self) -> None:
        """Load, once per entry, the images user entries name by path (off the loop)."""
        assert self.conversation is not None
        root = self.conversation.cwd
        for entry in self.entries:
            if entry.kind != EntryKind.USER or entry.id in self._prompt_images:
                continue
            lowered = entry.text.lower()
            if not any(suffix in lowered for suffix in IMAGE_SUFFIXES):
                self._prompt_images[entry.id] = ()
                continue
            images, notes = await asyncio.to_thread(prompt_images, entry.text, root)
            for note in notes:
                log.warning("image in the prompt not attached: %s", note)
            self._prompt_images[entry.id] = tuple(images)

    async def _fit(self, run: Run) -> ModelRequest:
        """The next request, compacting first when it would not leave the reserve free
        (and in the background once it nears that: runtime.run.compacting)."""
        await self._load_prompt_images()
        ready = getattr(self.deps.toolbox, "ready", None)
        if ready is not None:  # MCP servers (runtime.mcp): their tools, or their failure
            await ready()
        self.track(self.compaction.take_background())
        request, budget = self._request(run), self.compactor.budget
        if not await asyncio.to_thread(exceeds, request, int(budget * BACKGROUND_AT)):
            return request
        if not await asyncio.to_thread(exceeds, request, budget):
            if self._turns_streamed:  # (a run of one request would end before its summary)
                self.compaction.start_background(run.id, self._pre_compact(run))
            return request
        if await self.compact(run, "auto") is None:
            return request  # nothing whole to compact: an overflow will say so
        return self._request(run)

    async def compact(self, run: Run, reason: str) -> Entry | None:
        """Compact inside this run (under its lease), shown and cancellable
        (runtime.run.compacting); None if nothing was."""
        entry = await self.compaction.run(run.id, reason, self._pre_compact(run))
        self.track(entry)
        return entry

    def _pre_compact(self, run: Run) -> Gate | None:
        hooks = self.deps.hooks
        return None if hooks is None else (lambda: hooks.pre_compact(self, run, "auto"))

    async def _hooked(self, run: Run, request: ModelRequest) -> ModelRequest:
        """The request after its PreRequest hooks (runtime.hooks.rounds): their messages
        for this request only; a hook's block fails the run (`hook_blocked`)."""
        if self.deps.hooks is None:
            return request
        request, blocked = await self.deps.hooks.pre_request(self, run, request)
        if blocked is not None:
            raise RunAborted({"code": "hook_blocked", "message": blocked})
        return request

    async def _stream_turn(self, run: Run) -> tuple[Entry, list[ToolCallRecord], Run]:
        request = await self._hooked(run, await self._fit(run))
        live = self.deps.live
        live.restart()
        blank = Entry(
            uuid7(), self.conversation_id, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "",
            now(), run_id=run.id,
        )  # fmt: skip

        def opened(e: Entry) -> None:
            live.entry_id = e.id
            self.track(e)

        entry = await self.commit(lambda tx: tx.add_entry(blank), after=opened)
        self._turns_streamed += 1
        failpoints.hit("turn.opened")
        usage = Usage.from_dict(run.usage)
        ticker = asyncio.create_task(self._tick(), name="checkpoint-timer")
        try:
            state = await self._attempts(run, entry, request, usage)
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
        turn_usage, quality = await self._turn_usage(state.request or request, state)
        spent = state.spent
        total = usage + spent.usage + turn_usage
        usage_dict = spent.into(
            self.usage_record(run, total, worse(quality, spent.quality)), run.usage
        )
        usage_dict["context_tokens"] = turn_usage.input_tokens + turn_usage.output_tokens
        return await self._complete_turn(run, entry, state, usage_dict)

    def price(self, usage: Usage) -> Usage:
        """`usage` with a cost: the provider's when it sent one, else the catalog's prices."""
        if usage.cost is not None:
            return usage
        info = self.deps.model_info
        cost = cost_of(info, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        return msgspec.structs.replace(usage, cost=cost)

    def usage_record(self, run: Run, usage: Usage, quality: Quality) -> dict[str, Any]:
        """The run's usage dict: summed counts, their quality, the model."""
        record = usage.to_dict()
        record["quality"] = worse(run.usage.get("quality", Quality.MEASURED), quality)
        record["model"] = self.deps.model_info.spec
        if "context_tokens" in run.usage:
            record["context_tokens"] = run.usage["context_tokens"]
        return record

    async def _attempts(
        self, run: Run, entry: Entry, request: ModelRequest, usage: Usage
    ) -> TurnState:
        """Stream the response, retrying what may be retried within the deadline."""
        settings = self.deps.settings
        started = time.monotonic()
        spent = Spent()  # what the attempts that did not answer used (runtime.run.spend)
        attempt = 0
        compacted: bool | None = None  # tried once per turn: then whether it compacted
        while True:
            attempt += 1
            state = TurnState()
            state.request = request
            try:
                await self._consume(run, entry, request, state)
                state.spent = spent
                return state
            except asyncio.CancelledError:
                self.cut = (request, state, spent, attempt)  # an interrupt counts it
                raise
            except ProviderError as exc:
                await self._spend(
                    request, state, spent, attempt, "failed", exc.reason or exc.message
                )
                if exc.is_context_overflow() and not state.calls and compacted is None:
                    compacted = await self._overflowed(run, entry, attempt, exc)
                    if compacted:  # retry once, with the summary
                        request = await self._hooked(run, self._request(run))
                        continue
                delay = self._backoff(attempt, exc)
                late = time.monotonic() - started + delay > settings.retry_deadline
                limit = settings.max_retries
                if exc.retry_limit is not None:  # this failure is worth fewer tries (empty answer)
                    limit = min(limit, exc.retry_limit)
                if not exc.retryable or state.calls or attempt > limit or late:
                    async with self.lock:
                        await self.checkpoint()
                    await self._close_entry(entry, EntryStatus.FAILED)
                    record = self.usage_record(run, usage + spent.usage, spent.quality)
                    spent_usage = spent.into(record, run.usage)
                    error = run_error(exc, compacted, self.compaction.cancelled)
                    raise RunAborted(error, spent_usage) from exc
                await self._reset_attempt(run, entry, attempt, exc, delay)
                await asyncio.sleep(delay)

    async def _spend(
        self, request: ModelRequest, state: TurnState, spent: Spent, attempt: int, *how: str
    ) -> None:
        """Add what an attempt that did not answer used to `spent` (runtime.run.spend)."""
        live = self.deps.live
        reported = state.usage if state.usage_reported else None
        streamed = live.text + live.reasoning.text
        spend = await AttemptSpend.of(request, streamed, reported, self.price)
        spent.add(spend, attempt, *how)

    async def _overflowed(self, run: Run, entry: Entry, attempt: int, exc: ProviderError) -> bool:
        """The provider said the prompt is too long: start the entry over and compact."""
        async with self.lock:
            await self.checkpoint()
        await self._reset_attempt(run, entry, attempt, exc, 0.0)
        return await self.compact(run, "overflow") is not None

    async def _turn_usage(self, request: ModelRequest, state: TurnState) -> tuple[Usage, Quality]:
        """The provider's usage for this response, or a tiktoken estimate if it sent none."""
        if state.usage_reported:
            return self.price(state.usage), Quality.MEASURED
        usage, quality = await estimate_usage_async(request.messages, self.deps.live.text)
        return self.price(usage), quality

    async def _consume(
        self, run: Run, entry: Entry, request: ModelRequest, state: TurnState
    ) -> None:
        live = self.deps.live
        interval = self.deps.settings.checkpoint_interval
        async for item in valid_stream(self.deps.provider.stream(request)):
            async with self.lock:
                if isinstance(item, TextChunk):
                    offset = live.body.add(item.text)
                    self.deps.publish(
                        TextDelta(
                            self.conversation_id, run.id, live.epoch, self.next_seq(), entry.id,
                            offset, item.text,
                        )
                    )  # fmt: skip
                elif isinstance(item, ReasoningChunk) and not item.text:
                    state.signature = item.signature or state.signature
                elif isinstance(item, ReasoningChunk):
                    live.reasoning.add(item.text)
                    self.deps.publish(
                        ReasoningDelta(
                            self.conversation_id, run.id, live.epoch, self.next_seq(), entry.id,
                            item.text,
                        )
                    )  # fmt: skip
                elif isinstance(item, ToolCallChunk):
                    state.add_call_chunk(item)
                elif isinstance(item, UsageReport):
                    state.usage = item.usage
                    state.usage_reported = True
                elif isinstance(item, StreamEnd):
                    state.finish_reason = item.finish_reason
                if time.monotonic() - self._last_checkpoint >= interval:
                    await self.checkpoint()

    async def _tick(self) -> None:
        """Checkpoint during pauses: nothing shown stays uncommitted past the interval."""
        interval = self.deps.settings.checkpoint_interval
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() - self._last_checkpoint < interval:
                continue
            async with self.lock:
                await self.checkpoint()

    async def checkpoint(self) -> None:
        """Commit the streamed text and reasoning not committed yet, as chunks. Hold `lock`."""
        live = self.deps.live
        entry_id = live.entry_id
        self._last_checkpoint = time.monotonic()
        if entry_id is None:
            return
        body, reasoning = live.body, live.reasoning
        text, thought = body.pending(), reasoning.pending()
        if text is None and thought is None:
            return

        def build(tx: Tx) -> tuple[int, int]:
            ends = [body.committed, reasoning.committed]
            if text is not None:
                ends[0] = tx.append_chunk(entry_id, "text", *text)
            if thought is not None:
                ends[1] = tx.append_chunk(entry_id, "reasoning", *thought)
            return ends[0], ends[1]

        def committed(ends: tuple[int, int]) -> None:
            body.mark(ends[0])
            reasoning.mark(ends[1])

        await self.commit(build, after=committed)
        self._last_checkpoint = time.monotonic()
        failpoints.hit("checkpoint")
        failpoints.hit(f"checkpoint.{self._turns_streamed}")  # the Nth of this turn

    async def _reset_attempt(
        self, run: Run, entry: Entry, attempt: int, exc: ProviderError, delay: float
    ) -> None:
        log.info("retrying model request (attempt %d): %s", attempt + 1, exc.message)
        live = self.deps.live
        async with self.lock:
            await self.commit(
                lambda tx: tx.reset_entry(entry.but(status=EntryStatus.STREAMING)),
                after=lambda _: live.restart(),
            )
            self.deps.publish(
                AttemptReset(
                    self.conversation_id, run.id, live.epoch, self.next_seq(), entry.id,
                    attempt + 1, exc.reason or exc.message, delay,
                )
            )  # fmt: skip

    def _backoff(self, attempt: int, exc: ProviderError) -> float:
        if exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), 60.0)
        s = self.deps.settings
        return float(min(s.backoff_cap, s.backoff_base * (2 ** (attempt - 1))))

    async def _close_entry(
        self, entry: Entry, status: EntryStatus, data: dict[str, Any] | None = None
    ) -> Entry | None:
        """Close the streaming entry: its committed chunks become its text."""

        def closed(e: Entry | None) -> None:
            self.deps.live.entry_id = None
            self.track(e)

        return await self.commit(
            lambda tx: tx.close_entry(entry.id, status, data or {}), after=closed
        )

    async def _complete_turn(
        self, run: Run, entry: Entry, state: TurnState, usage: dict[str, Any]
    ) -> tuple[Entry, list[ToolCallRecord], Run]:
        async with self.lock:
            await self.checkpoint()
        records = [self.calls.intent(run, entry, i, c) for i, c in enumerate(state.finished())]
        records = await self.calls.previews(records)
        data: dict[str, Any] = {}
        if records:
            data["tool_calls"] = [
                {"key": r.id, "id": r.provider_id, "name": r.name, "arguments": r.arguments}
                for r in records
            ]
            if state.signature:
                data["reasoning_signature"] = state.signature

        def build(tx: Tx) -> tuple[Entry | None, Run | None]:
            closed = tx.close_entry(entry.id, EntryStatus.COMPLETE, data)
            for record in records:
                tx.insert_tool_call(self.calls.by_rules(tx, record))
            if not records:  # the answer: usage lands with the run's end (one event less)
                return closed, run.but(usage=usage)
            return closed, tx.transition_run(run.id, ACTIVE_RUN_STATES, usage=usage)

        def landed(out: tuple[Entry | None, Run | None]) -> None:
            self.deps.live.entry_id = None
            self.track(out[0])

        closed, updated = await self.commit(build, after=landed)
        if closed is None or updated is None:
            raise RunLost(run.id)
        return closed, records, updated

    # --- endings ----------------------------------------------------------

    async def _close_streaming(self, status: EntryStatus) -> None:
        entry_id = self.deps.live.entry_id
        if entry_id is not None:
            await self._close_entry(self.entries[self._positions[entry_id]], status)

    async def _finish_interrupted(self, run: Run) -> Run:
        """The run ends interrupted: by the user, or by a budget limit (`stop_error`,
        recorded as the run's error so every front end and a later resume can say why)."""
        await self._close_streaming(EntryStatus.INTERRUPTED)
        stop = self.stop_error
        stored = await self.deps.store.run(run.id)
        reason = stop["message"] if stop else ending_reason(stored, self.stop_reason)
        user = reason == BY_USER
        await self.calls.settle(run, "the user interrupted the run" if user else reason)
        changes: dict[str, Any] = {"error": stop} if stop else {}
        cut, self.cut = self.cut, None
        if cut is not None:  # cut off mid-stream: what that attempt used counts too
            request, state, spent, attempt = cut
            await self._spend(request, state, spent, attempt, "interrupted", "interrupted")
            current = await self.deps.store.run(run.id) or run
            total = Usage.from_dict(current.usage) + spent.usage
            record = self.usage_record(current, total, spent.quality)
            changes["usage"] = spent.into(record, current.usage)
        try:
            return await self.transition(run, state=RunState.INTERRUPTED, reason=reason, **changes)
        except RunLost:  # it ended meanwhile (answered as the time ran out): as stored
            return await self.deps.store.run(run.id) or run

    async def _fail(
        self, run: Run, error: dict[str, Any], usage: dict[str, Any] | None = None
    ) -> Run:
        await self._close_streaming(EntryStatus.FAILED)
        await self.calls.settle(run, "the run failed")
        changes: dict[str, Any] = {"usage": usage} if usage else {}
        return await self.transition(
            run, state=RunState.FAILED, reason=error.get("message"), error=error, **changes
        )
