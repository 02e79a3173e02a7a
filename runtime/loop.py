"""The model loop: one run, from its admitted input to its final answer.

Durable order per turn: assistant entry created (streaming) → partial text
checkpointed at most every `checkpoint_interval` → completion committed with
the tool call intents → each call: approval if required → execute → result
committed → queued steers placed → next model request. Every commit is
shielded from cancellation, so an interrupt or shutdown never abandons a
half-written transaction, and events are published only after their commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runtime.approvals import ApprovalMode, Decision, decide, refusal_text
from runtime.context import build_messages
from runtime.events import AttemptReset, Event, ReasoningDelta, TextDelta, ToolOutputDelta
from runtime.ids import uuid7
from runtime.providers.base import (
    ModelRequest,
    Provider,
    ProviderError,
    ReasoningChunk,
    StreamEnd,
    TextChunk,
    ToolCallChunk,
    Usage,
    UsageReport,
)
from runtime.records import (
    Approval,
    Entry,
    EntryKind,
    EntryStatus,
    InboxItem,
    InboxMode,
    InboxState,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.store import Snapshot, Store, Tx
from runtime.tokens import Quality, estimate_usage_async
from runtime.toolbox import Toolbox, ToolOutcome

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LoopSettings:
    checkpoint_interval: float = 0.1
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    max_turns: int = 200


@dataclass(slots=True)
class LiveStream:
    """What this process has streamed for a run but maybe not yet committed."""

    epoch: int
    entry_id: str | None = None
    parts: list[str] = field(default_factory=list)
    length: int = 0
    committed: int = 0
    seq: int = 0

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


@dataclass(slots=True)
class LoopDeps:
    store: Store
    publish: Callable[[Event], None]
    provider: Provider
    model: str
    toolbox: Toolbox | None
    approval_mode: ApprovalMode
    interactive: bool
    token: int
    live: LiveStream
    wait_for_decision: Callable[[str], Awaitable[None]]
    settings: LoopSettings = field(default_factory=LoopSettings)
    on_refusal: Callable[[str, str], None] | None = None


class RunAborted(Exception):
    """The run cannot go on; carries the error recorded on it."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", "run failed"))
        self.error = error


def _now() -> float:
    return time.time()


class RunExecutor:
    def __init__(self, deps: LoopDeps, conversation_id: str) -> None:
        self.deps = deps
        self.conversation_id = conversation_id
        self.interrupting = False
        self._inflight: asyncio.Future[Any] | None = None

    # --- commits ----------------------------------------------------------

    async def commit(self, build: Callable[[Tx], T], after: Callable[[T], None] | None = None) -> T:
        """Run `build` in one fenced transaction, then `after`, then publish its events.

        Shielded: a cancellation (interrupt, shutdown) arriving mid-commit still
        lets the commit land, so whatever the loop remembers about committed state
        must change in `after`, inside the shield, never after the await.
        """

        async def inner() -> T:
            async with self.deps.store.write(self.conversation_id, self.deps.token) as tx:
                result = build(tx)
            if after is not None:
                after(result)
            for event in tx.events:
                self.deps.publish(event)
            return result

        self._inflight = asyncio.ensure_future(inner())
        return await asyncio.shield(self._inflight)

    async def _settle_inflight(self) -> None:
        """After a cancellation: let a commit that was under way land before cleaning up."""
        task = self._inflight
        if task is not None and not task.done():
            await asyncio.wait([task])
        if task is not None and not task.cancelled():
            task.exception()  # retrieved here; the caller's own error path reports failures

    def _next_seq(self) -> int:
        """The next transient seq of this run in this process (1, 2, 3, ...)."""
        self.deps.live.seq += 1
        return self.deps.live.seq

    async def set_run(self, run: Run, **changes: Any) -> Run:
        updated = run.but(updated_at=_now(), revision=run.revision + 1, **changes)
        return await self.commit(lambda tx: tx.put_run(updated))

    # --- the run ----------------------------------------------------------

    async def execute(self, run: Run) -> Run:
        """Drive `run` to a terminal state. Cancellation: see `interrupting`."""
        try:
            if run.state != RunState.RUNNING:
                run = await self.set_run(run, state=RunState.RUNNING)
            return await self._turns(run)
        except asyncio.CancelledError:
            await self._settle_inflight()
            await self._checkpoint(run.id)
            if not self.interrupting:
                raise
            return await self._finish_interrupted(run)
        except RunAborted as aborted:
            return await self._fail(run, aborted.error)

    async def _turns(self, run: Run) -> Run:
        for _ in range(self.deps.settings.max_turns):
            snap = await self.deps.store.snapshot(self.conversation_id)
            run = next((r for r in snap.runs if r.id == run.id), run)
            unfinished = [
                c
                for c in snap.tool_calls
                if c.run_id == run.id and c.state in (ToolCallState.PENDING, ToolCallState.RUNNING)
            ]
            if unfinished:
                run = await self._run_tool_calls(run, unfinished)
                await self._place_steers(run)
                continue
            entry, calls, run = await self._stream_turn(run, snap)
            if not calls:
                return await self.set_run(
                    run, state=RunState.COMPLETED, reason="answered", result_entry_id=entry.id
                )
            run = await self._run_tool_calls(run, calls)
            await self._place_steers(run)
        raise RunAborted({"code": "max_turns", "message": "the run reached its turn limit"})

    # --- one model request ------------------------------------------------

    def _request(self, snap: Snapshot, run: Run) -> ModelRequest:
        specs = self.deps.toolbox.specs() if self.deps.toolbox else ()
        messages = build_messages(snap.conversation, snap.entries, run.id, specs)
        return ModelRequest(self.deps.model, messages, specs, session_id=self.conversation_id)

    async def _stream_turn(
        self, run: Run, snap: Snapshot
    ) -> tuple[Entry, list[ToolCallRecord], Run]:
        request = self._request(snap, run)
        entry = Entry(
            uuid7(),
            self.conversation_id,
            0,
            EntryKind.ASSISTANT,
            EntryStatus.STREAMING,
            "",
            _now(),
            run_id=run.id,
        )
        live = self.deps.live
        live.parts, live.length, live.committed = [], 0, 0
        entry = await self.commit(
            lambda tx: tx.add_entry(entry), after=lambda e: setattr(live, "entry_id", e.id)
        )
        usage = Usage.from_dict(run.usage)
        attempt = 0
        while True:
            attempt += 1
            state = _TurnState()
            try:
                await self._consume(run, entry, request, state)
                break
            except ProviderError as exc:
                usage = usage + state.usage  # failed attempts count too, as measured
                limit = self.deps.settings.max_retries
                if exc.retry_limit is not None:  # this failure is worth fewer tries (empty answer)
                    limit = min(limit, exc.retry_limit)
                if not exc.retryable or state.calls or attempt > limit:
                    await self._checkpoint(run.id)
                    await self._close_entry(entry, EntryStatus.FAILED, state)
                    raise RunAborted(exc.to_dict()) from exc
                await self._reset_attempt(run, entry, attempt, exc)
                await asyncio.sleep(self._backoff(attempt, exc))
        turn_usage, quality = await self._turn_usage(request, state)
        usage_dict = (usage + turn_usage).to_dict()
        usage_dict["quality"] = _worse(run.usage.get("quality", Quality.MEASURED), quality)
        return await self._complete_turn(run, entry, state, usage_dict)

    async def _turn_usage(self, request: ModelRequest, state: _TurnState) -> tuple[Usage, Quality]:
        """The provider's usage for this response, or a tiktoken estimate if it sent none."""
        if state.usage_reported:
            return state.usage, Quality.MEASURED
        return await estimate_usage_async(request.messages, self.deps.live.text)

    async def _consume(
        self, run: Run, entry: Entry, request: ModelRequest, state: _TurnState
    ) -> None:
        live = self.deps.live
        interval = self.deps.settings.checkpoint_interval
        last = time.monotonic()
        async for item in self.deps.provider.stream(request):
            if isinstance(item, TextChunk):
                offset = live.length
                live.parts.append(item.text)
                live.length += len(item.text)
                self.deps.publish(
                    TextDelta(
                        self.conversation_id,
                        run.id,
                        live.epoch,
                        self._next_seq(),
                        entry.id,
                        offset,
                        item.text,
                    )
                )
                if time.monotonic() - last >= interval:
                    await self._checkpoint(run.id)
                    last = time.monotonic()
            elif isinstance(item, ReasoningChunk):
                state.reasoning.append(item.text)
                self.deps.publish(
                    ReasoningDelta(
                        self.conversation_id,
                        run.id,
                        live.epoch,
                        self._next_seq(),
                        entry.id,
                        item.text,
                    )
                )
            elif isinstance(item, ToolCallChunk):
                state.add_call_chunk(item)
            elif isinstance(item, UsageReport):
                state.usage = item.usage
                state.usage_reported = True
            elif isinstance(item, StreamEnd):
                state.finish_reason = item.finish_reason

    async def _checkpoint(self, run_id: str) -> None:
        live = self.deps.live
        if live.entry_id is None or live.committed >= live.length:
            return
        text = live.text[live.committed :]
        offset, entry_id = live.committed, live.entry_id

        def committed(_: None) -> None:
            live.committed = offset + len(text)

        await self.commit(lambda tx: tx.append_text(entry_id, offset, text), after=committed)

    async def _reset_attempt(
        self, run: Run, entry: Entry, attempt: int, exc: ProviderError
    ) -> None:
        log.info("retrying model request (attempt %d): %s", attempt + 1, exc.message)
        live = self.deps.live
        reset = entry.but(text="", status=EntryStatus.STREAMING)

        def forget(_: Entry) -> None:
            live.parts, live.length, live.committed = [], 0, 0

        await self.commit(lambda tx: tx.update_entry(reset), after=forget)
        self.deps.publish(
            AttemptReset(
                self.conversation_id,
                run.id,
                live.epoch,
                self._next_seq(),
                entry.id,
                attempt + 1,
                exc.message,
            )
        )

    def _backoff(self, attempt: int, exc: ProviderError) -> float:
        if exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), 60.0)
        s = self.deps.settings
        return float(min(s.backoff_cap, s.backoff_base * (2 ** (attempt - 1))))

    async def _close_entry(self, entry: Entry, status: EntryStatus, state: _TurnState) -> Entry:
        data = {"reasoning": "".join(state.reasoning)} if state.reasoning else {}
        closed = entry.but(status=status, text=self.deps.live.text, data=data)
        return await self.commit(lambda tx: tx.update_entry(closed), after=self._stream_closed)

    async def _complete_turn(
        self, run: Run, entry: Entry, state: _TurnState, usage: dict[str, Any]
    ) -> tuple[Entry, list[ToolCallRecord], Run]:
        text = self.deps.live.text
        data: dict[str, Any] = {}
        if state.reasoning:
            data["reasoning"] = "".join(state.reasoning)
        calls = state.finished_calls()
        if calls:
            data["tool_calls"] = [{"id": c[0], "name": c[1], "arguments": c[2]} for c in calls]
        done = entry.but(status=EntryStatus.COMPLETE, text=text, data=data)
        records = [self._intent(run, done, i, c) for i, c in enumerate(calls)]
        updated = run.but(updated_at=_now(), revision=run.revision + 1, usage=usage)

        def build(tx: Tx) -> None:
            tx.update_entry(done)
            for record in records:
                tx.put_tool_call(record)
            tx.put_run(updated)

        await self.commit(build, after=self._stream_closed)
        return done, records, updated

    def _stream_closed(self, _: object) -> None:
        """The streaming entry's final state is committed: nothing live is left to close."""
        self.deps.live.entry_id = None

    def _intent(
        self, run: Run, entry: Entry, index: int, call: tuple[str, str, str]
    ) -> ToolCallRecord:
        call_id, name, arguments = call
        info = self.deps.toolbox.info(name) if self.deps.toolbox else None
        read_only = info.read_only if info else True
        decision = decide(self.deps.approval_mode, name, read_only)
        approval = {
            Decision.RUN: Approval.NOT_REQUIRED,
            Decision.ASK: Approval.PENDING if self.deps.interactive else Approval.DENIED,
            Decision.REFUSE: Approval.DENIED,
        }[decision]
        now = _now()
        return ToolCallRecord(
            call_id,
            self.conversation_id,
            run.id,
            entry.id,
            index,
            name,
            arguments,
            info.replay_safe if info else True,
            approval,
            ToolCallState.PENDING,
            now,
            now,
        )

    # --- tool calls -------------------------------------------------------

    async def _run_tool_calls(self, run: Run, calls: list[ToolCallRecord]) -> Run:
        for call in calls:
            run = await self._run_tool_call(run, call)
        return run

    async def _run_tool_call(self, run: Run, call: ToolCallRecord) -> Run:
        if call.state == ToolCallState.RUNNING and not call.replay_safe:
            outcome = ToolOutcome(
                False,
                (
                    f"INTERRUPTED: {call.name} was running when the previous process stopped; "
                    "its effects are unknown.\nhint: check the workspace state before repeating it."
                ),
                {"refusal": {"code": "INTERRUPTED"}},
            )
            await self._commit_result(call, ToolCallState.INTERRUPTED, outcome)
            return run
        if call.approval == Approval.PENDING and not self.deps.interactive:
            # Asked for by an interactive session that stopped; this one cannot ask.
            call = call.but(approval=Approval.DENIED, updated_at=_now())
        while call.approval == Approval.PENDING:
            if run.state != RunState.AWAITING_APPROVAL:
                run = await self.set_run(run, state=RunState.AWAITING_APPROVAL)
            await self.deps.wait_for_decision(call.id)
            snap = await self.deps.store.snapshot(self.conversation_id)
            call = next(c for c in snap.tool_calls if c.id == call.id)
        if run.state == RunState.AWAITING_APPROVAL:
            run = await self.set_run(run, state=RunState.RUNNING)
        if call.approval == Approval.DENIED:
            text = refusal_text(
                self.deps.approval_mode, call.name, interactive=self.deps.interactive
            )
            if self.deps.on_refusal is not None:
                self.deps.on_refusal(call.name, text)
            await self._commit_result(
                call,
                ToolCallState.DENIED,
                ToolOutcome(False, text, {"refusal": {"code": "FORBIDDEN", "message": text}}),
            )
            return run
        started = call.but(state=ToolCallState.RUNNING, updated_at=_now())
        await self.commit(lambda tx: tx.put_tool_call(started))
        outcome = await self._execute(call)
        await self._commit_result(started, ToolCallState.DONE, outcome)
        return run

    async def _execute(self, call: ToolCallRecord) -> ToolOutcome:
        if self.deps.toolbox is None:
            return ToolOutcome(
                False,
                f"REFUSED INVALID_ARGUMENT: no tools are available here "
                f"(asked for {call.name}).\nhint: answer without tools.",
            )
        live = self.deps.live

        def output(text: str) -> None:
            self.deps.publish(
                ToolOutputDelta(
                    self.conversation_id, call.run_id, live.epoch, self._next_seq(), call.id, text
                )
            )

        try:
            return await self.deps.toolbox.run(call.name, call.arguments, on_output=output)
        except Exception as exc:  # a tool's failure is that call's, never the run's
            log.warning("tool %s raised", call.name, exc_info=True)
            return ToolOutcome(
                False,
                f"REFUSED INTERNAL: {call.name} failed unexpectedly ({type(exc).__name__}).\n"
                "hint: try again once; if it fails again, take another approach.",
                {"refusal": {"code": "INTERNAL", "message": type(exc).__name__}},
            )

    async def _commit_result(
        self, call: ToolCallRecord, state: ToolCallState, outcome: ToolOutcome
    ) -> None:
        entry = Entry(
            uuid7(),
            self.conversation_id,
            0,
            EntryKind.TOOL_RESULT,
            EntryStatus.COMPLETE,
            outcome.model_text,
            _now(),
            run_id=call.run_id,
            data={
                "tool_call_id": call.id,
                "name": call.name,
                "ok": outcome.ok,
                "images": list(outcome.images),
            },
        )

        def build(tx: Tx) -> None:
            placed = tx.add_entry(entry)
            tx.put_tool_call(
                call.but(
                    state=state,
                    updated_at=_now(),
                    result=outcome.data | {"ok": outcome.ok},
                    result_entry_id=placed.id,
                )
            )

        await self.commit(build)

    async def _place_steers(self, run: Run) -> None:
        snap = await self.deps.store.snapshot(self.conversation_id)
        steers = [
            i for i in snap.inbox if i.state == InboxState.QUEUED and i.mode == InboxMode.STEER
        ]
        if steers:
            await self.commit(lambda tx: [place_item(tx, item, run.id) for item in steers])

    # --- endings ----------------------------------------------------------

    async def _settle_calls(self, run: Run, reason: str) -> None:
        snap = await self.deps.store.snapshot(self.conversation_id)
        for call in snap.tool_calls:
            if call.run_id == run.id and call.state in (
                ToolCallState.PENDING,
                ToolCallState.RUNNING,
            ):
                effects = (
                    "its effects are unknown"
                    if call.state == ToolCallState.RUNNING
                    else "it did not run"
                )
                await self._commit_result(
                    call,
                    ToolCallState.INTERRUPTED,
                    ToolOutcome(
                        False,
                        f"INTERRUPTED: {reason}; {effects}.",
                        {"refusal": {"code": "INTERRUPTED"}},
                    ),
                )

    async def _finish_interrupted(self, run: Run) -> Run:
        live = self.deps.live
        if live.entry_id is not None:
            snap = await self.deps.store.snapshot(self.conversation_id)
            entry = next(e for e in snap.entries if e.id == live.entry_id)
            closed = entry.but(status=EntryStatus.INTERRUPTED)
            await self.commit(lambda tx: tx.update_entry(closed), after=self._stream_closed)
        await self._settle_calls(run, "the user interrupted the run")
        run = await self._latest(run)
        return await self.set_run(run, state=RunState.INTERRUPTED, reason="interrupted by the user")

    async def _fail(self, run: Run, error: dict[str, Any]) -> Run:
        await self._settle_calls(run, "the run failed")
        run = await self._latest(run)
        return await self.set_run(
            run, state=RunState.FAILED, reason=error.get("message"), error=error
        )

    async def _latest(self, run: Run) -> Run:
        snap = await self.deps.store.snapshot(self.conversation_id)
        return next((r for r in snap.runs if r.id == run.id), run)


def place_item(tx: Tx, item: InboxItem, run_id: str) -> Entry:
    """Place a queued inbox item into run `run_id`: its user entry, and the item marked placed."""
    entry = tx.add_entry(
        Entry(
            uuid7(),
            item.conversation_id,
            0,
            EntryKind.USER,
            EntryStatus.COMPLETE,
            item.text,
            _now(),
            run_id=run_id,
            data={"inbox_id": item.id},
        )
    )
    tx.put_inbox(item.but(state=InboxState.PLACED, run_id=run_id, entry_id=entry.id))
    return entry


_QUALITY_ORDER = (Quality.MEASURED, Quality.ESTIMATED, Quality.UNAVAILABLE)


def _worse(a: str, b: str) -> Quality:
    """The less trustworthy of two usage qualities: a sum is only as good as its worst part."""
    return max(Quality(a), Quality(b), key=_QUALITY_ORDER.index)


class _TurnState:
    __slots__ = ("calls", "finish_reason", "reasoning", "usage", "usage_reported")

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.calls: dict[int, list[str]] = {}
        self.usage = Usage()
        self.usage_reported = False
        self.finish_reason: str | None = None

    def add_call_chunk(self, chunk: ToolCallChunk) -> None:
        call = self.calls.setdefault(chunk.index, ["", "", ""])
        if chunk.id:
            call[0] = chunk.id
        if chunk.name:
            call[1] = chunk.name
        call[2] += chunk.arguments

    def finished_calls(self) -> list[tuple[str, str, str]]:
        out = []
        for index in sorted(self.calls):
            call_id, name, arguments = self.calls[index]
            out.append((call_id or f"call_{uuid7()}", name, arguments or "{}"))
        return out
