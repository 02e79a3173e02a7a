"""Tool calls of a run: intent → approval → start → execute → result, each a
compare-and-set in its own transaction.

A call's key is its own (uuid7); the provider's id is kept as data. Approval
answers and interrupts race through the store: `respond` moves approval
pending → approved/denied only while the call is pending; an interrupt moves a
pending or running call to interrupted. Exactly one of them wins; this side
re-reads the call and goes on from whatever won. A running command's output is
checkpointed as chunks at the loop's cadence, so a call cut off by a crash or
an interrupt reports the output it had produced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from typing import Any

import msgspec

from runtime.config.approvals import Decision, decide, refusal_text
from runtime.config.rules import guarded_path
from runtime.model.events import ToolOutputDelta
from runtime.model.ids import now, uuid7
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    Approval,
    Entry,
    EntryKind,
    EntryStatus,
    InboxItem,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.rules import EDIT_TOOLS
from runtime.model.tools import CURRENT_CALL, ToolOutcome
from runtime.run.deps import CallHost
from runtime.run.effects import finish_with_effects, start_with_effects
from runtime.run.live import Buffer
from runtime.run.sandboxing import ask_without_walls
from runtime.schedule import groups, may_overlap, run_together
from runtime.store import failpoints
from runtime.store.jobs import insert_job
from runtime.store.todos import record_todos
from runtime.store.tx import TOOL_COLUMNS, Tx, joined_chunks, tool_call_row

log = logging.getLogger(__name__)
_OPEN = (ToolCallState.PENDING, ToolCallState.RUNNING)
GUARDED_REFUSAL = (
    "REFUSED FORBIDDEN: .bastion/ holds the user's own bastion settings "
    "(settings.toml: the approval rules they chose); tools never write it.\n"
    "hint: tell the user what you would change there; only they edit that file."
)
OUTPUT_TAIL = 4_000  # characters of a cut-off command's output given to the model


class CallRunner:
    def __init__(self, executor: CallHost) -> None:
        self.ex = executor
        self.deps = executor.deps

    # --- intent -------------------------------------------------------------

    def intent(
        self, run: Run, entry: Entry, index: int, call: tuple[str, str, str]
    ) -> ToolCallRecord:
        provider_id, name, arguments = call
        key = uuid7()
        info = self.deps.toolbox.info(name) if self.deps.toolbox else None
        read_only = info.read_only if info else True
        decision = decide(self.deps.approval_mode, name, read_only)
        # Hook: where the sandbox has no walls, a command asks (runtime.run.sandboxing).
        decision, review = ask_without_walls(
            decision, name, self.deps.toolbox, self.deps.interactive
        )
        approval = {
            Decision.RUN: Approval.NOT_REQUIRED,
            Decision.ASK: Approval.PENDING,  # unless a rule allows it (`by_rules`)
            Decision.REFUSE: Approval.DENIED,
        }[decision]
        if decision != Decision.REFUSE and name in EDIT_TOOLS and guarded_path(arguments):
            approval, review = Approval.DENIED, {"refusal": GUARDED_REFUSAL}
        stamp = now()
        return ToolCallRecord(
            key, self.ex.conversation_id, run.id, entry.id, index, name, arguments,
            info.replay_safe if info else True, approval, ToolCallState.PENDING, stamp, stamp,
            provider_id=provider_id or f"call_{key.replace('-', '')}", review=review,
        )  # fmt: skip

    async def previews(self, calls: list[ToolCallRecord]) -> list[ToolCallRecord]:
        """Writes and edits get the diff of what they would change (read in a thread),
        kept with the call: the approval prompt and the tool row show it."""
        preview = getattr(self.deps.toolbox, "preview", None)
        if preview is None:
            return calls
        out = []
        for call in calls:
            if call.name in EDIT_TOOLS and call.approval != Approval.DENIED:
                found = await asyncio.to_thread(preview, call.name, call.arguments)
                if found is not None:
                    call = call.but(review={**(call.review or {}), **found})
            out.append(call)
        return out

    def by_rules(self, tx: Tx, call: ToolCallRecord) -> ToolCallRecord:
        """Inside the transaction that records the call: a call that would ask runs when
        the rules allow it (the rules are named on it); one that cannot ask is refused."""
        if call.approval != Approval.PENDING:
            return call
        book = self.deps.rules
        used = book.allowing(tx.session_rules(), call.name, call.arguments) if book else ()
        if used:
            review = {**(call.review or {}), "allowed_by": [r.to_dict() for r in used]}
            return call.but(approval=Approval.APPROVED, review=review)
        if self.deps.interactive:
            return call
        # Marked: refused because nobody can be asked here (its PreToolUse hooks still run).
        return call.but(
            approval=Approval.DENIED, review={**(call.review or {}), "cannot_ask": True}
        )

    # --- a call a PreToolUse hook rewrote (runtime.hooks.context.CallVetting) ----

    def schema_problem(self, name: str, arguments: dict[str, object]) -> str | None:
        """What is wrong with `arguments` for tool `name` by its schema; None if fine
        (or the tool is unknown here: running it reports that)."""
        from tools.schema import check

        specs = self.deps.toolbox.specs() if self.deps.toolbox else ()
        spec = next((s for s in specs if s.name == name), None)
        return check(spec.parameters, arguments) if spec is not None else None

    async def preview(self, name: str, arguments: str) -> dict[str, object] | None:
        make = getattr(self.deps.toolbox, "preview", None)
        if make is None or name not in EDIT_TOOLS:
            return None
        found: dict[str, object] | None = await asyncio.to_thread(make, name, arguments)
        return found

    def redecide(self, tx: Tx, call: ToolCallRecord) -> ToolCallRecord:
        """In the transaction that stored a hook's rewrite of `call`: a guarded path is
        refused as if the model had asked for it, and a call the user's rules allowed
        (for the arguments the model asked for) is decided by the rules again."""
        review = dict(call.review or {})
        if call.name in EDIT_TOOLS and guarded_path(call.arguments):
            changes: dict[str, Any] = {
                "approval": Approval.DENIED, "review": {**review, "refusal": GUARDED_REFUSAL},
            }  # fmt: skip
        elif review.pop("allowed_by", None) is not None:
            again = self.by_rules(tx, call.but(approval=Approval.PENDING, review=review))
            changes = {"approval": again.approval, "review": again.review}
        else:
            return call
        changed = tx.transition_tool_call(
            call.id, from_states=(ToolCallState.PENDING,), from_approvals=(call.approval,),
            **changes,
        )  # fmt: skip
        return changed or call

    # --- running ------------------------------------------------------------

    async def run_all(self, run: Run, calls: list[ToolCallRecord]) -> Run:
        """Every call, in asked order; neighbouring reads run together (runtime.schedule)."""
        # Hook: work a toolbox can start for the whole round at once (runtime.agents
        # starts every subagent of the round here, so they run side by side).
        prepare = getattr(self.deps.toolbox, "prepare_calls", None)
        if prepare is not None:
            await prepare(calls)
        limit = self.deps.settings.parallel_calls
        for group in groups(calls, self._overlaps) if limit > 1 else [(c,) for c in calls]:
            if len(group) == 1:
                run = await self._one(run, group[0])
                continue
            await run_together(group, functools.partial(self._one, run), limit)
        if run.state == RunState.AWAITING_APPROVAL:
            run = await self.ex.transition(run, state=RunState.RUNNING)
        return run

    def _overlaps(self, call: ToolCallRecord) -> bool:
        info = self.deps.toolbox.info(call.name) if self.deps.toolbox else None
        return may_overlap(call, info)

    async def _one(self, run: Run, call: ToolCallRecord) -> Run:
        if call.state == ToolCallState.RUNNING and not call.replay_safe:
            await self._cut_off(call, "was running when the previous process stopped")
            return run
        hooks = self.deps.hooks
        pending = call.state == ToolCallState.PENDING and call.approval != Approval.DENIED
        if hooks is not None and pending:
            found = await hooks.before_tool(self.ex, call, self)  # PreToolUse: deny or rewrite
            if found is None:
                return run  # settled meanwhile (an interrupt won)
            call = found
        if call.approval == Approval.PENDING and not self.deps.interactive:
            # Asked for by an interactive session that stopped; this one cannot ask.
            call = await self._decide(call, Approval.DENIED) or call
        if call.approval == Approval.PENDING:
            run, found = await self._await_approval(run, call)
            if found is None:
                return run
            call = found
        if run.state == RunState.AWAITING_APPROVAL:
            run = await self.ex.transition(run, state=RunState.RUNNING)
        if call.approval == Approval.DENIED:
            await self._deny(call)
            return run
        if call.state == ToolCallState.PENDING:
            # Hook: what the call will change is recorded with its start (runtime/run/effects.py).
            started = await start_with_effects(self.ex.commit, self.deps.toolbox, call)
            if started is None:
                return run  # settled meanwhile (an interrupt won)
            call = started
        failpoints.hit("call.started")
        outcome = await self._execute(call)
        failpoints.hit("call.executed")
        # Hook: the tree a command left, so a restore undoes its changes alone.
        await finish_with_effects(self.deps.toolbox, call, self.deps.store.read, self.ex.commit)
        await self.commit_result(call, ToolCallState.DONE, outcome)
        failpoints.hit("call.result")
        if hooks is not None:
            await hooks.after_tool(self.ex, call, outcome)  # PostToolUse
        return run

    async def _await_approval(
        self, run: Run, call: ToolCallRecord
    ) -> tuple[Run, ToolCallRecord | None]:
        """Wait for an answer from any front end (the store decides); None if the call
        was settled meanwhile."""
        if run.state != RunState.AWAITING_APPROVAL:
            run = await self.ex.transition(run, state=RunState.AWAITING_APPROVAL)
        failpoints.hit("approval.wait")
        while True:
            await self.deps.wait_for_decision(call.id)
            found = await self.deps.store.tool_call(call.id)
            if found is None or found.state != ToolCallState.PENDING:
                await self.ex.check_interrupt(run)  # settled by an interrupt: stop here
                return run, None
            if found.approval != Approval.PENDING:
                return run, found

    async def _decide(self, call: ToolCallRecord, approval: Approval) -> ToolCallRecord | None:
        return await self.ex.commit(
            lambda tx: tx.transition_tool_call(
                call.id,
                from_states=(ToolCallState.PENDING,),
                from_approvals=(Approval.PENDING,),
                approval=approval,
            )
        )

    async def _deny(self, call: ToolCallRecord) -> None:
        review = call.review or {}
        text = review.get("refusal") or refusal_text(
            self.deps.approval_mode,
            call.name,
            interactive=self.deps.interactive,
            message=review.get("message"),
        )
        if self.deps.on_refusal is not None:
            self.deps.on_refusal(call.name, text)
        await self.commit_result(
            call,
            ToolCallState.DENIED,
            ToolOutcome(False, text, {"refusal": {"code": "FORBIDDEN", "message": text}}),
        )

    async def _execute(self, call: ToolCallRecord) -> ToolOutcome:
        if self.deps.toolbox is None:
            return ToolOutcome(
                False,
                f"REFUSED INVALID_ARGUMENT: no tools are available here "
                f"(asked for {call.name}).\nhint: answer without tools.",
            )
        live = self.deps.live
        buffer = live.outputs[call.id] = Buffer()
        limit = self.deps.settings.output_commit_limit

        def output(text: str) -> None:
            if buffer.length < limit:
                buffer.add(text[: limit - buffer.length])
            self.deps.publish(
                ToolOutputDelta(
                    self.ex.conversation_id, call.run_id, live.epoch, self.ex.next_seq(),
                    call.id, text,
                )
            )  # fmt: skip

        async def started(record: dict[str, Any]) -> None:
            """What the command started, committed before it is waited for: a resume
            after a crash finds it there and makes sure it is gone (a background job's
            row too: runtime.store.jobs)."""

            def build(tx: Tx) -> None:
                tx.transition_tool_call(
                    call.id, from_states=(ToolCallState.RUNNING,), process=record
                )
                insert_job(tx, call, record)

            await self.ex.commit(build)

        ticker = asyncio.create_task(self._checkpoint_output(call.id, buffer))
        # "run outside the sandbox once" / "with network": the user's committed answer
        override = (call.review or {}).get("sandbox")
        extra: dict[str, Any] = {"sandbox": override} if override else {}
        CURRENT_CALL.set(call)
        try:
            return await self.deps.toolbox.run(
                call.name, call.arguments, on_output=output, on_start=started, **extra
            )
        except Exception as exc:  # a tool's failure is that call's, never the run's
            log.warning("tool %s raised", call.name, exc_info=True)
            return ToolOutcome(
                False,
                f"REFUSED INTERNAL: {call.name} failed unexpectedly ({type(exc).__name__}).\n"
                "hint: try again once; if it fails again, take another approach.",
                {"refusal": {"code": "INTERNAL", "message": type(exc).__name__}},
            )
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            await self._commit_output(call.id, buffer)  # what it printed, even if cut off
            live.outputs.pop(call.id, None)

    async def _checkpoint_output(self, call_id: str, buffer: Buffer) -> None:
        interval = self.deps.settings.checkpoint_interval
        while True:
            await asyncio.sleep(interval)
            await self._commit_output(call_id, buffer)

    async def _commit_output(self, call_id: str, buffer: Buffer) -> None:
        pending = buffer.pending()
        if pending is None:
            return
        await self.ex.commit(
            lambda tx: tx.append_chunk(call_id, "output", *pending), after=buffer.mark
        )

    # --- results ------------------------------------------------------------

    async def commit_result(
        self, call: ToolCallRecord, state: ToolCallState, outcome: ToolOutcome
    ) -> bool:
        """The result entry and the call's final state, together; false if the call was
        already settled (nothing written)."""

        def build(tx: Tx) -> Entry | None:
            return settle_call(tx, call, state, outcome)

        placed = await self.ex.commit(build, after=self.ex.track)
        return placed is not None

    async def _cut_off(self, call: ToolCallRecord, why: str) -> None:
        """A side-effecting call that cannot be run again: make sure what it started is
        gone, then tell the model what it printed and that its effects are unknown."""
        reaped = await self._reap(call)
        output = await self.deps.store.read(lambda db: joined_chunks(db, call.id, "output"))
        recover = getattr(self.deps.toolbox, "interrupted_output", None)
        if call.process is not None and recover is not None:
            # The command's own output file is written as output arrives: it may hold
            # the last lines, printed after the last checkpoint.
            written = recover(call.process) or ""
            if len(written.strip()) > len(output.strip()):
                output = written
        text = f"INTERRUPTED: {call.name} {why}; its effects are unknown."
        if reaped:
            text += f"\n{reaped}"
        if output:
            tail = output[-OUTPUT_TAIL:]
            cut = " (last part)" if len(output) > len(tail) else ""
            text += f"\noutput before it stopped{cut}:\n{tail}"
        text += "\nhint: check the workspace state before repeating it."
        outcome = ToolOutcome(False, text, {"refusal": {"code": "INTERRUPTED"}})
        await self.commit_result(call, ToolCallState.INTERRUPTED, outcome)

    async def _reap(self, call: ToolCallRecord) -> str:
        """Kill whatever the call's command left running (before the model hears of it)."""
        if call.process is None:
            return ""
        from runtime.run.toolbox import reap_processes

        summary = await asyncio.to_thread(reap_processes, call.process)
        killed = [f"{name} ({pid})" for pid, name in summary.get("killed", ())]
        remaining = [f"{name} ({pid})" for pid, name in summary.get("remaining", ())]
        lines = []
        if killed:
            lines.append("processes it left running were killed: " + ", ".join(killed))
        if remaining:
            lines.append("processes that may still run: " + ", ".join(remaining))
        if summary.get("note") and remaining:
            lines.append(str(summary["note"]))
        return "\n".join(lines)

    async def settle(self, run: Run, reason: str) -> None:
        """Every call of `run` still open ends as interrupted (the run is ending)."""
        rows = await self.deps.store.open_tool_calls(run.id)
        for call in rows:
            if call.state == ToolCallState.RUNNING and not call.replay_safe:
                await self._cut_off(call, f"was cut off: {reason}")
                continue
            effects = (
                "its effects are unknown"
                if call.state == ToolCallState.RUNNING
                else "it did not run"
            )
            await self.commit_result(
                call,
                ToolCallState.INTERRUPTED,
                ToolOutcome(
                    False,
                    f"INTERRUPTED: {reason}; {effects}.",
                    {"refusal": {"code": "INTERRUPTED"}},
                ),
            )


def redact_outcome(outcome: ToolOutcome) -> ToolOutcome:
    """`outcome` without the exact value of any key bastion holds: whatever printed it
    (a command reading /proc, an MCP server), it never reaches a provider."""
    from runtime.config.secrets import redactor

    redact = redactor()
    if not redact:
        return outcome
    data = redact.value(outcome.data)
    assert isinstance(data, dict)
    return msgspec.structs.replace(outcome, model_text=redact.text(outcome.model_text), data=data)


def settle_call(
    tx: Tx, call: ToolCallRecord, state: ToolCallState, outcome: ToolOutcome
) -> Entry | None:
    """In one transaction: the call's final state and its result entry (compare-and-set
    on the call still being pending or running; None, nothing written, if it was not).
    The values of the keys bastion holds are redacted from both (runtime.config.secrets)."""
    outcome = redact_outcome(outcome)
    note = rewritten_note(call)
    entry = Entry(
        uuid7(), call.conversation_id, 0, EntryKind.TOOL_RESULT, EntryStatus.COMPLETE,
        note + outcome.model_text, now(), run_id=call.run_id,
        data={
            **({"rewritten_note": note} if note else {}),  # kept when a hook replaces the rest
            "tool_call_id": call.id,
            "provider_id": call.wire_id,
            "name": call.name,
            "ok": outcome.ok,
            "images": list(outcome.images),
        },
    )  # fmt: skip
    settled = tx.transition_tool_call(
        call.id,
        from_states=_OPEN,
        state=state,
        result=outcome.data | {"ok": outcome.ok},
        result_entry_id=entry.id,
    )
    if settled is None:
        return None
    record_todos(tx, call, outcome)  # a `todo` call's list becomes the conversation's
    tx.execute("DELETE FROM chunks WHERE owner_id = ? AND kind = 'output'", (call.id,))
    return tx.add_entry(entry)


REWRITE_SHOWN = 2_000  # characters of rewritten arguments the model is shown


def rewritten_note(call: ToolCallRecord) -> str:
    """The line a result starts with when a PreToolUse hook rewrote the call: the model
    keeps its call as it asked for it (the record of what it said), and is told what
    ran instead, so a result that does not match its request does not puzzle it."""
    rewritten = (call.review or {}).get("rewritten")
    if not rewritten:
        return ""
    by = ", ".join(f"`{b}`" for b in rewritten.get("by", ())) or "a hook"
    shown = (
        call.arguments
        if len(call.arguments) <= REWRITE_SHOWN
        else (call.arguments[:REWRITE_SHOWN] + "…")
    )
    return f"[a PreToolUse hook ({by}) rewrote this call's arguments; it ran with: {shown}]\n"


def interrupt_tx(tx: Tx) -> tuple[Run | None, list[InboxItem]]:
    """The interrupt, committed: the active run marked `interrupt_requested`, its calls
    that have not started settled (so a late approval cannot start them), and every
    queued input withdrawn. The driver then cancels what is running."""
    active = tx.active_run()
    if active is None:
        return None, tx.withdraw_queued()
    marked = active
    if not active.interrupt_requested:
        marked = tx.transition_run(active.id, ACTIVE_RUN_STATES, interrupt_requested=True) or active
    rows = tx.rows(
        f"SELECT {TOOL_COLUMNS} FROM tool_calls WHERE run_id = ? AND state = 'pending' "
        'ORDER BY "index"',
        (active.id,),
    )
    text = "INTERRUPTED: the user interrupted the run; it did not run."
    for row in rows:
        outcome = ToolOutcome(False, text, {"refusal": {"code": "INTERRUPTED"}})
        settle_call(tx, tool_call_row(row), ToolCallState.INTERRUPTED, outcome)
    return marked, tx.withdraw_queued()
