"""The machinery every hook point shares (`HookRunner`): running a point's hooks in
order in the hooks' sandbox, recording each in the ledger (`hook.ran`) and as a line
in the transcript, the at-most-once bookkeeping of effect hooks, and what a hook's
answer tells the model. `runtime.hooks.points` and `runtime.hooks.rounds` build the
points of a run on it; the module docstring of `points` says what each keeps.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.hooks.config import HookSet, HookSpec
from runtime.hooks.decide import HookResult, interpret
from runtime.hooks.process import HookOutput, hook_env, run_hook
from runtime.model.events import HookRan
from runtime.model.ids import now, uuid7
from runtime.model.records import Entry, EntryKind, EntryStatus, Run, ToolCallRecord
from runtime.store.dialect import Db, dialect_of
from runtime.store.tx import Tx

if TYPE_CHECKING:
    from runtime.hooks.context import RunContext
    from tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)
FOR_MODEL_LIMIT = 8_000  # characters of hook feedback one note gives the model
STOP_CONTINUATIONS = 3  # times Stop hooks may keep one run going (no endless loop)


class HookRunner:
    """The configured hooks of one driver, run in workspace `root` in `policy` (the
    session's command sandbox; a project's hooks in a narrower one, see `_policy`)."""

    def __init__(self, hooks: HookSet, root: str, policy: SandboxPolicy | None) -> None:
        self.hooks = hooks
        self.root = root
        self.policy = policy
        self.session_started = False
        self._resumed: set[str] = set()  # runs this process took over part-way
        self._continued: dict[str, int] = {}  # run id: times a Stop hook kept it going

    async def _recover(self, ex: RunContext, run: Run) -> None:
        """At-most-once hooks of `run` that a crash cut off: marked interrupted, a line each."""
        rows = await ex.store.read(lambda db: _rows(db, ex.conversation_id, run.id, ""))
        latest: dict[str, dict[str, Any]] = {}
        for row in rows:
            latest[row["key"]] = row
        cut = [r for r in latest.values() if r["state"] == "started"]
        if cut:
            await self._cut(ex, run.id, cut, "was cut off when bastion stopped")

    async def _cut(
        self, ex: RunContext, run_id: str, cut: Sequence[dict[str, Any]], how: str
    ) -> None:
        """Hooks (as their ledger rows) that were started and did not finish: marked
        interrupted, a line each; none of them is run again."""

        def build(tx: Tx) -> list[Entry]:
            entries = []
            for row in cut:
                line = (
                    f"{row['hook_event']} hook `{row['command']}` {how}; it is not run "
                    "again (its effects are unknown)"
                )
                _emit(tx, run_id, row["key"], row["hook_event"], row["command"], "interrupted",
                      "interrupted")  # fmt: skip
                entries.append(tx.add_entry(_note(ex, run_id, line, {"key": row["key"]})))
            return entries

        await ex.commit(build, after=lambda out: _track(ex, out))

    # --- running and recording ------------------------------------------------

    async def _effects(
        self, ex: RunContext, run_id: str, prefix: str, specs: Sequence[HookSpec],
        payload: dict[str, Any], tool: str | None, call_id: str | None = None,
        *, for_model: bool = True,
    ) -> list[HookResult]:  # fmt: skip
        """Hooks that run at most once: committed as started, run, committed as done
        (with a PostToolUse hook's replacement of call `call_id`'s result)."""

        def started(tx: Tx) -> None:
            for spec in specs:
                _emit(tx, run_id, prefix + _digest(spec), spec.event, spec.shown, "started", "")

        await ex.commit(started)
        try:
            results = await self._run_all(specs, payload, gate=False)
        except asyncio.CancelledError:
            if ex.interrupting:  # the user's interrupt killed it: say so now (a crash: on resume)
                await self._cut(ex, run_id, [
                    {"key": prefix + _digest(s), "hook_event": s.event, "command": s.shown}
                    for s in specs
                ], "was cut off by an interrupt")  # fmt: skip
            raise
        await ex.commit(
            lambda tx: self._record(
                tx,
                run_id,
                prefix,
                results,
                "done",
                for_model=for_model,
                tool=tool,
                replaces=call_id,
            ),
            after=lambda out: _track(ex, out),
        )
        return results

    async def _run_all(
        self, specs: Sequence[HookSpec], payload: dict[str, Any], gate: bool,
        *, rewrites: bool = False,
    ) -> list[HookResult]:  # fmt: skip
        """Each hook in order; a gate stops at the first block. With `rewrites`, a hook
        that rewrote the call's arguments hands the next hook the new ones."""
        results = []
        for spec in specs:
            data = json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8", "replace")
            env = hook_env(self.root, spec.event)
            try:
                out = await run_hook(
                    spec.command, data, self.root, self._policy(spec), spec.timeout, env
                )
            except Exception as exc:  # the supervisor broke its protocol: no decision
                log.warning("hook %s failed to run", spec.command, exc_info=True)
                out = HookOutput(None, error=f"it could not be run ({type(exc).__name__}: {exc})")
            result = redact_result(interpret(spec, out))
            results.append(result)
            if gate and result.decision == "block":
                break
            if rewrites and result.updated is not None:
                payload = {**payload, "tool_input": json.loads(result.updated)}
        return results

    def _policy(self, spec: HookSpec) -> SandboxPolicy | None:
        """A project's hooks never run wider than workspace-write, network off, with none
        of the user's extra writable paths, whatever the user's own sandbox is."""
        if spec.source == "user" or self.policy is None:
            return self.policy
        from tools.sandbox import SandboxMode

        mode = self.policy.mode
        if mode is SandboxMode.DANGER_FULL_ACCESS:
            mode = SandboxMode.WORKSPACE_WRITE
        return replace(self.policy, mode=mode, network=False, writable=(), hosts=())

    def _record(
        self, tx: Tx, run_id: str, prefix: str, results: Sequence[HookResult], state: str,
        *, for_model: bool = False, withdraws: str | None = None, tool: str | None = None,
        replaces: str | None = None,
    ) -> list[Entry]:  # fmt: skip
        """In the caller's transaction: a HookRan per result and a note per result worth
        a line (and, `for_model`, per result with something for the model; with
        `replaces`, per PostToolUse result replacing that call's result: the note holds
        the replacement, runtime.context.messages sends it instead of the result)."""
        ex_id = tx.conversation_id
        entries = []
        for r in results:
            _emit(
                tx, run_id, prefix + _digest(r.spec), r.spec.event, r.spec.shown, state, r.outcome
            )
            told = _for_model(r, tool) if for_model else ""
            swap = replaces if r.updated is not None and r.spec.event == "PostToolUse" else None
            if r.line or told or withdraws or swap:
                data: dict[str, Any] = {"hook": r.to_dict()}
                if told:
                    data["for_model"] = told
                if withdraws:
                    data["withdraws"] = withdraws
                if swap:
                    data |= {"replaces_call": swap, "replacement": r.updated}
                line = r.line or _line(r, tool, bool(swap))
                if r.spec.event == "PostToolBatch" and r.decision == "block":
                    line = (
                        f"PostToolBatch hook `{r.spec.shown}` stopped the run after its tool "
                        f"round: {r.reason[:200]}"
                    )
                if r.spec.event == "Stop" and r.decision == "block" and not for_model:
                    line = (
                        f"Stop hook `{r.spec.shown}` asked to keep the run going again; a run "
                        f"goes on at most {STOP_CONTINUATIONS} times, so it ends: {r.reason[:200]}"
                    )
                entry = Entry(
                    uuid7(), ex_id, 0, EntryKind.NOTE, EntryStatus.COMPLETE, line, now(),
                    run_id=run_id or None, data=data,
                )  # fmt: skip
                entries.append(tx.add_entry(entry))
        return entries

    async def _decided(self, ex: RunContext, run_id: str, prefix: str) -> bool:
        """Whether a gate already committed its decision (only a resumed run can have)."""
        if run_id not in self._resumed:
            return False
        rows = await ex.store.read(lambda db: _rows(db, ex.conversation_id, run_id, prefix))
        return any(r["state"] == "done" for r in rows)

    def _payload(self, ex: RunContext, event: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": ex.conversation_id,
            "cwd": self.root,
            "hook_event_name": event,
            **fields,
        }


def _line(result: HookResult, tool: str | None, swapped: bool) -> str:
    """The transcript's line for a hook's answer that is not a failure or a block."""
    name = f"{result.spec.event} hook `{result.spec.shown}`"
    if swapped:
        return (
            f"{name} replaced the result of {tool} the model sees "
            f"({len(result.updated or '')} characters; the tool's own result is kept)"
        )
    return f"{name} added context for the model"


def _for_model(result: HookResult, tool: str | None) -> str:
    """What the model is told of an effect or context hook's answer: a block reason
    (exit 2 stderr) after a tool or at a stop, additionalContext (or a context
    event's plain stdout) after a tool, on a prompt and at the session's start."""
    event, blocked = result.spec.event, result.decision == "block"
    reason = result.reason if blocked and event in ("PostToolUse", "Stop", "PostResponse") else ""
    context = result.context if event != "Stop" else ""
    parts = [p for p in (reason, context) if p]
    if not parts:
        return ""
    about = f" after {tool}" if tool else ""
    text = f"[{event} hook `{result.spec.shown}`{about}]\n" + "\n".join(parts)
    return text[:FOR_MODEL_LIMIT]


def _emit(
    tx: Tx, run_id: str, key: str, event: str, command: str, state: str, outcome: str
) -> None:
    """A HookRan in `tx` (the ledger row a resumed session reads back)."""
    cid = tx.conversation_id
    tx.emit(lambda v: HookRan(cid, v, run_id, key, event, command, state, outcome))


def _note(ex: RunContext, run_id: str, line: str, hook: dict[str, Any]) -> Entry:
    return Entry(
        uuid7(), ex.conversation_id, 0, EntryKind.NOTE, EntryStatus.COMPLETE, line, now(),
        run_id=run_id, data={"hook": hook},
    )  # fmt: skip


def _track(ex: RunContext, entries: Sequence[Entry]) -> None:
    for entry in entries:
        ex.track(entry)


def _digest(spec: HookSpec) -> str:
    return hashlib.sha256(f"{spec.source}\0{spec.command}".encode()).hexdigest()[:16]


def _args(call: ToolCallRecord) -> Any:
    try:
        return json.loads(call.arguments or "{}")
    except ValueError:
        return call.arguments


def _rows(db: Db, conversation_id: str, run_id: str | None, prefix: str) -> list[dict[str, Any]]:
    """The hook.ran payloads of the conversation (of `run_id`, if given) whose key starts
    with `prefix`, oldest first."""
    field = dialect_of(db).json_text
    sql = (
        "SELECT payload FROM ledger WHERE conversation_id = ? AND type = 'hook.ran' "
        f"AND substr({field('payload', 'key')}, 1, ?) = ?"
    )
    params: list[Any] = [conversation_id, len(prefix), prefix]
    if run_id is not None:
        sql += f" AND {field('payload', 'run_id')} = ?"
        params.append(run_id)
    found: list[dict[str, Any]] = [
        json.loads(r[0]) for r in db.execute(sql + " ORDER BY seq", params)
    ]
    return found


def redact_result(result: HookResult) -> HookResult:
    """A hook's reason, context and line without the value of any key bastion holds
    (runtime.config.secrets): what a hook prints goes to the model."""
    from runtime.config.secrets import redactor

    redact = redactor()
    if not redact:
        return result
    return msgspec.structs.replace(
        result,
        reason=redact.text(result.reason),
        context=redact.text(result.context),
        line=redact.text(result.line),
        updated=_redacted(redact, result),
    )


def _redacted(redact: Any, result: HookResult) -> str | None:
    """A rewrite or replacement without the keys' values: new arguments value by value
    (they stay a JSON object), a replaced result as text."""
    if result.updated is None or result.spec.event != "PreToolUse":
        return redact.text(result.updated) if result.updated is not None else None
    return json.dumps(redact.value(json.loads(result.updated)), ensure_ascii=False)
