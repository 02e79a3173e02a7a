"""Where hooks run in a run, what each decision does, and what the ledger keeps.

One `Hooks` per driver (per conversation and process). The model loop calls it:

- `run_start`: SessionStart (the first run this process drives), UserPromptSubmit
  (a run's own prompt; `steer`: a steer joining it), and, on a resumed run,
  a note for each at-most-once hook a crash cut off;
- `before_tool` (PreToolUse) before the approval prompt: "block" denies the call
  and the model gets the reason as its result; "approve" ("allow") changes
  nothing but a line: a hook's answer is never an approval (ARCHITECTURE: trust
  boundary). Approvals come only from the user, at their terminal or a client they
  authenticated; a hook runs code a repository can influence, and the user's
  approval rules are the way to let a kind of call run unasked. `updatedInput`
  rewrites the call: checked against the tool's schema and decided again by the
  approval rules and guarded paths (`CallVetting`), stored with the decision;
- `after_tool` (PostToolUse) once the result is committed: a block reason, exit 2
  stderr or additionalContext reaches the model as a note before its next request;
- `pre_compact` (PreCompact) before a run compacts automatically: instructions for
  the summary, or "block" (no automatic compaction for the rest of the run);
- `pre_request`, `post_response`, `post_tool_batch` (PreRequest, PostResponse,
  PostToolBatch, bastion's own): runtime.hooks.rounds;
- `stop` (Stop) when the model answered, before the run is committed as answered
  (not when it failed or was interrupted): "block" (or exit 2) keeps the run going
  with the reason as the model's next input, at most STOP_CONTINUATIONS times per
  run; `stop_hook_active` tells the hook it already did (a run resumed after its
  Stop hooks ran, or were cut off, ends with that answer: runtime.run.resumed);

What the ledger keeps (`hook.ran` events, runtime.model.events.HookRan) and so what a
resumed session does:

- gates (PreToolUse, UserPromptSubmit, PreCompact) are committed with their decision in one
  transaction: once committed they never run again for that call or prompt; if
  bastion dies while one runs it runs again on resume (at least once, until
  decided) — a gate that was skipped could let through what it exists to stop;
  PreRequest is recorded each time it runs but runs again for a request sent again
  (a request is not an effect: runtime.hooks.rounds);
- effects (PostToolUse, Stop, SessionStart; PostResponse, PostToolBatch) are
  committed as started before they run and done after: at most once. One cut off by an interrupt is marked
  interrupted at once, one cut off by a crash on resume, each with a line in the
  transcript, and neither is run again (a hook that posts or deploys must not
  repeat); one that never started (bastion died between the tool's result and
  the hook) does not run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.hooks.decide import HookResult
from runtime.hooks.rounds import RoundHooks
from runtime.hooks.running import (
    FOR_MODEL_LIMIT,
    STOP_CONTINUATIONS,
    _args,
    _rows,
    _track,
)
from runtime.model.ids import now, uuid7
from runtime.model.records import (
    ACTIVE_RUN_STATES,
    Approval,
    Entry,
    EntryKind,
    EntryStatus,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.store.tx import Tx

if TYPE_CHECKING:
    from runtime.hooks.context import CallVetting, RunContext
    from runtime.model.tools import ToolOutcome


class Hooks(RoundHooks):
    """The configured hooks of one driver, run in workspace `root` in `policy` (the
    session's command sandbox; a project's hooks in a narrower one, see `_policy`)."""

    # --- the points in a run -----------------------------------------------

    async def run_start(self, ex: RunContext, run: Run, resumed: bool) -> Run | None:
        """Before the run's first model request. Returns the run, ended, when a
        UserPromptSubmit hook blocked its prompt; else None."""
        if resumed:
            self._resumed.add(run.id)
            await self._recover(ex, run)
        if not self.session_started:
            self.session_started = True
            await self._session_start(ex, run)
        return await self._prompt(ex, run)

    @staticmethod
    def may_decide(call: ToolCallRecord) -> bool:
        """Whether PreToolUse runs for `call`: not for one refused already (by the
        approval mode, a guarded path), but for one refused only because nobody can be
        asked here (print mode): its hooks still see it, and may block it."""
        return call.approval != Approval.DENIED or bool((call.review or {}).get("cannot_ask"))

    async def before_tool(
        self, ex: RunContext, call: ToolCallRecord, vet: CallVetting | None = None
    ) -> ToolCallRecord | None:
        """PreToolUse for a call about to be approved or run: the call as it is now
        (denied by a hook, its arguments rewritten by one, or unchanged); None if it
        was settled meanwhile. A rewrite is checked against the tool's schema and
        decided again by `vet` (approval rules, guarded paths) in the transaction that
        stores it, with the hooks' decisions: the prompt shows it and the tool runs it."""
        specs = self.hooks.matching("PreToolUse", call.name)
        prefix = f"PreToolUse:{call.id}:"
        if not specs:
            return call
        fresh = await ex.store.tool_call(call.id)  # the rules decided in its insert
        if fresh is None or fresh.state != ToolCallState.PENDING:
            return None
        call = fresh
        if not self.may_decide(call) or await self._decided(ex, call.run_id, prefix):
            return call
        payload = self._payload(ex, "PreToolUse", tool_name=call.name, tool_input=_args(call))
        found = await self._run_all(specs, payload, gate=True, rewrites=True)
        results = _checked([_not_an_approval(r) for r in found], call.name, vet)
        block = next((r for r in results if r.decision == "block"), None)
        changes = await _changes(call, results, block, vet)

        def build(tx: Tx) -> tuple[list[Entry], ToolCallRecord | None]:
            entries = self._record(tx, call.run_id, prefix, results, "done")
            if not changes:
                return entries, tx.tool_call(call.id)
            changed = tx.transition_tool_call(
                call.id, from_states=(ToolCallState.PENDING,),
                from_approvals=(call.approval,), **changes,
            )  # fmt: skip
            if changed is not None and "arguments" in changes and vet is not None:
                changed = vet.redecide(tx, changed)
            return entries, changed

        _, found_call = await ex.commit(build, after=lambda out: _track(ex, out[0]))
        if found_call is None:  # changed meanwhile (an answer, an interrupt): as it is now
            found_call = await ex.store.tool_call(call.id)
        if found_call is not None and found_call.state == ToolCallState.PENDING:
            return found_call
        return None

    async def after_tool(self, ex: RunContext, call: ToolCallRecord, outcome: ToolOutcome) -> None:
        """PostToolUse, once the call's result is committed (at most once)."""
        specs = self.hooks.matching("PostToolUse", call.name)
        if not specs:
            return
        response = {**outcome.data, "ok": outcome.ok, "text": outcome.model_text}
        payload = self._payload(
            ex, "PostToolUse", tool_name=call.name, tool_input=_args(call), tool_response=response
        )
        await self._effects(
            ex, call.run_id, f"PostToolUse:{call.id}:", specs, payload, call.name, call.id
        )

    async def stop(self, ex: RunContext, run: Run, answer: Entry) -> bool:
        """Stop, when the model answered and before the run is committed as answered
        (at most once per answer). True when a hook blocked the stop: the run goes on,
        its reason told to the model, at most STOP_CONTINUATIONS times per run."""
        specs = self.hooks.matching("Stop")
        if not specs:
            return False
        went_on = self._continued.get(run.id, 0)
        payload = self._payload(
            ex, "Stop", stop_hook_active=went_on > 0, last_assistant_message=answer.text
        )
        allowed = went_on < STOP_CONTINUATIONS
        results = await self._effects(
            ex, run.id, f"Stop:{answer.id}:", specs, payload, None, for_model=allowed
        )
        if allowed and any(r.decision == "block" for r in results):
            self._continued[run.id] = went_on + 1
            return True
        return False

    async def pre_compact(self, ex: RunContext, run: Run, trigger: str) -> tuple[bool, str]:
        """PreCompact before `run` compacts automatically: (blocked, instructions for
        the summary). A gate: decided once per point of the conversation (its newest
        entry other than a note), committed with its decision; a resumed run that
        compacts at the same point reads the decision back instead of asking again."""
        specs = self.hooks.matching("PreCompact")
        if not specs:
            return False, ""
        point = next((e.id for e in reversed(ex.entries) if e.kind != EntryKind.NOTE), "")
        prefix = f"PreCompact:{run.id}:{point}:"
        if await self._decided(ex, run.id, prefix):
            rows = await ex.store.read(lambda db: _rows(db, ex.conversation_id, run.id, prefix))
            said = [e for e in ex.entries if e.data.get("compact_key") == prefix]
            blocked = any(r["outcome"] == "block" for r in rows)
            return blocked, str(said[-1].data.get("instructions", "")) if said else ""
        payload = self._payload(ex, "PreCompact", trigger=trigger, custom_instructions="")
        results = await self._run_all(specs, payload, gate=True)
        blocked = any(r.decision == "block" for r in results)
        given = [r for r in results if r.context and not blocked]
        instructions = "\n\n".join(r.context for r in given)[:FOR_MODEL_LIMIT]

        def build(tx: Tx) -> list[Entry]:
            entries = self._record(tx, run.id, prefix, results, "done")
            if instructions:
                line = (
                    f"PreCompact hook `{given[0].spec.shown}` added instructions to the "
                    f"summary: {instructions.splitlines()[0][:200]}"
                )
                data = {"hook": given[0].to_dict(), "compact_key": prefix,
                        "instructions": instructions}  # fmt: skip
                entries.append(tx.add_entry(Entry(
                    uuid7(), tx.conversation_id, 0, EntryKind.NOTE, EntryStatus.COMPLETE,
                    line, now(), run_id=run.id, data=data,
                )))  # fmt: skip
            return entries

        await ex.commit(build, after=lambda out: _track(ex, out))
        return blocked, instructions

    async def manual_compact(self, ex: RunContext, instructions: str) -> str:
        """PreCompact for a compaction the user asked for (/compact, trigger "manual",
        their instructions on stdin): the instructions to use, theirs then the hooks'.
        A hook's block does not stop what the user asked for; its line says so."""
        specs = self.hooks.matching("PreCompact")
        if not specs:
            return instructions
        payload = self._payload(
            ex, "PreCompact", trigger="manual", custom_instructions=instructions
        )
        results = [
            msgspec.structs.replace(r, decision="", line=r.line + " (a /compact you asked for goes on)")
            if r.decision == "block" else r
            for r in await self._run_all(specs, payload, gate=False)
        ]  # fmt: skip
        added = "\n\n".join(r.context for r in results if r.context)[:FOR_MODEL_LIMIT]
        key = f"PreCompact:manual:{uuid7()}:"
        await ex.commit(
            lambda tx: self._record(tx, "", key, results, "done"),
            after=lambda out: _track(ex, out),
        )
        return "\n\n".join(p for p in (instructions, added) if p)

    async def _session_start(self, ex: RunContext, run: Run) -> None:
        specs = self.hooks.matching("SessionStart")
        if not specs:
            return
        earlier = await ex.store.read(
            lambda db: _rows(db, ex.conversation_id, None, "SessionStart:")
        )
        payload = self._payload(ex, "SessionStart", source="resume" if earlier else "startup")
        await self._effects(ex, run.id, f"SessionStart:{run.id}:", specs, payload, None)

    async def _prompt(self, ex: RunContext, run: Run) -> Run | None:
        specs = self.hooks.matching("UserPromptSubmit")
        prefix = f"UserPromptSubmit:{run.id}:"
        if not specs or await self._decided(ex, run.id, prefix):
            return None
        prompt = next(
            (e for e in ex.entries if e.kind == EntryKind.USER and e.run_id == run.id), None
        )
        if prompt is None:
            return None
        payload = self._payload(ex, "UserPromptSubmit", prompt=prompt.text)
        results = await self._run_all(specs, payload, gate=True)
        block = next((r for r in results if r.decision == "block"), None)

        def build(tx: Tx) -> tuple[list[Entry], Run | None]:
            if block is None:
                return self._record(tx, run.id, prefix, results, "done", for_model=True), None
            entries = self._record(tx, run.id, prefix, results, "done", withdraws=prompt.id)
            error = {"code": "hook_blocked", "message": f"the prompt was blocked: {block.reason}"}
            ended = tx.transition_run(
                run.id, ACTIVE_RUN_STATES, state=RunState.FAILED,
                reason=error["message"], error=error,
            )  # fmt: skip
            return entries, ended

        _, ended = await ex.commit(build, after=lambda out: _track(ex, out[0]))
        return ended

    async def steer(self, ex: RunContext, run: Run, entry: Entry) -> None:
        """UserPromptSubmit for a steer placed into `run` (its user entry): as for a run's
        prompt, but a block withdraws the steer alone (the model never sees it; the run
        goes on) instead of failing the run."""
        specs = self.hooks.matching("UserPromptSubmit")
        prefix = f"UserPromptSubmit:{run.id}:{entry.id}:"
        if not specs or await self._decided(ex, run.id, prefix):
            return
        payload = self._payload(ex, "UserPromptSubmit", prompt=entry.text)
        results = await self._run_all(specs, payload, gate=True)
        blocked = any(r.decision == "block" for r in results)

        def build(tx: Tx) -> list[Entry]:
            if not blocked:
                return self._record(tx, run.id, prefix, results, "done", for_model=True)
            return self._record(tx, run.id, prefix, results, "done", withdraws=entry.id)

        await ex.commit(build, after=lambda out: _track(ex, out))


REWRITE_KEYS = ("diff", "note")  # review keys made from the arguments (an edit's preview)


def _checked(results: list[HookResult], tool: str, vet: CallVetting | None) -> list[HookResult]:
    """The hooks' answers with the last rewrite checked against the tool's schema: one
    that does not fit blocks the call, naming the hook."""
    last = next((r for r in reversed(results) if r.updated is not None), None)
    if last is None or any(r.decision == "block" for r in results):
        return results
    problem = vet.schema_problem(tool, json.loads(last.updated or "{}")) if vet else None
    if problem is None:  # each rewrite is a line in the transcript (the prompt shows it)
        return [_said_rewrite(r, tool) if r.updated is not None else r for r in results]
    reason = (
        f"PreToolUse hook `{last.spec.shown}` rewrote the call's arguments into a shape "
        f"{tool} does not take ({problem}); the call is blocked (fix the hook's updatedInput)"
    )
    blocked = msgspec.structs.replace(
        last, outcome="block", decision="block", reason=reason, line=reason
    )
    return [blocked if r is last else r for r in results]


def _said_rewrite(result: HookResult, tool: str) -> HookResult:
    shown = result.updated or ""
    shown = shown if len(shown) <= 200 else shown[:199] + "…"
    said = f"PreToolUse hook `{result.spec.shown}` rewrote the arguments of {tool}: {shown}"
    return msgspec.structs.replace(result, line=f"{said}. {result.line}" if result.line else said)


async def _changes(
    call: ToolCallRecord, results: list[HookResult], block: HookResult | None,
    vet: CallVetting | None,
) -> dict[str, Any]:  # fmt: skip
    """What the hooks' answers change on the call: denied with the blocking hook's
    reason, or its arguments rewritten (the rewrite recorded in its review, with the
    arguments the model asked for and an edit's diff made again), or nothing."""
    if block is not None:
        text = (
            f"REFUSED FORBIDDEN: a PreToolUse hook (`{block.spec.shown}`) blocked this "
            f"call: {block.reason}\nhint: follow the hook's reason, or tell the user."
        )
        return {"approval": Approval.DENIED, "review": {**(call.review or {}), "refusal": text}}
    rewriters = [r for r in results if r.updated is not None]
    arguments = rewriters[-1].updated if rewriters else None
    if arguments is None or json.loads(arguments) == _args(call):
        return {}
    review = {k: v for k, v in (call.review or {}).items() if k not in REWRITE_KEYS}
    review["rewritten"] = {"by": [r.spec.shown for r in rewriters], "from": call.arguments}
    found = await vet.preview(call.name, arguments) if vet is not None else None
    return {"arguments": arguments, "review": {**review, **(found or {})}}


def _not_an_approval(result: HookResult) -> HookResult:
    """A PreToolUse hook that answered "approve" ("allow"): recorded as it answered,
    with the line saying it decided nothing."""
    if result.decision != "approve":
        return result
    return msgspec.structs.replace(
        result,
        line=(
            f"PreToolUse hook `{result.spec.shown}` answered approve: a hook cannot approve "
            "a call, so it is asked as usual (an approval rule lets such calls run)"
        ),
    )
