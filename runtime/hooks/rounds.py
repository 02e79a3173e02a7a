"""The hook points around a model request and a tool round: bastion's own events, the
seeds' `beforeRequest`, `afterResponse` and `afterTools` (Claude Code has none of them).

- `pre_request` (PreRequest) before each provider request of a run, the request's
  messages on stdin (runtime.hooks.requests): `hookSpecificOutput.messages` replaces
  them for that request only (the record is unchanged; each hook sees the messages
  the one before it left), "block" (or exit 2) fails the run (`hook_blocked`); a
  malformed answer or a failing hook is one line and the request goes as it was. A
  request is not an effect: a resumed run sends its request again and its hooks run
  again; each run is a `hook.ran` in the ledger all the same;
- `post_response` (PostResponse) once a response is committed (its text, its calls,
  the usage): observe-only, plus additionalContext (or a block reason) told to the
  model before its next request; at most once per response (keyed by its entry);
- `post_tool_batch` (PostToolBatch) once every call of a round has its result, before
  the next request: additionalContext for the model, or "block" ends the run there
  (it completes, a note naming the hook); at most once per round (keyed by the
  round's assistant entry). One that never started (bastion died between the last
  result and the hook) does not run, as for PostToolUse.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.hooks.requests import replacement, shown
from runtime.hooks.running import HookRunner, _args, _rows, _track
from runtime.model.ids import uuid7
from runtime.model.records import Entry, EntryKind

if TYPE_CHECKING:
    from runtime.hooks.context import RunContext
    from runtime.hooks.decide import HookResult
    from runtime.model.llm import ModelRequest
    from runtime.model.records import Run

RESULT_CHARS = 16_000  # characters of one call's result a PostToolBatch hook is given
ANSWER_CHARS = 64_000  # characters of a response's text a PostResponse hook is given


class RoundHooks(HookRunner):
    async def pre_request(
        self, ex: RunContext, run: Run, request: ModelRequest
    ) -> tuple[ModelRequest, str | None]:
        """PreRequest: (the request to send, None) or (the request, why a hook blocked
        it: the run fails with that)."""
        specs = self.hooks.matching("PreRequest")
        if not specs:
            return request, None
        results: list[HookResult] = []
        blocked: HookResult | None = None
        for spec in specs:  # one at a time: each sees the messages the last one left
            found = shown(request)
            payload = self._payload(ex, "PreRequest", **found.payload())
            (result,) = await self._run_all([spec], payload, gate=True)
            if result.decision == "block":
                blocked = result
            elif result.updated is not None:
                made = replacement(found, _parsed(result.updated, None))
                if isinstance(made, str):
                    line = (
                        f"PreRequest hook `{spec.shown}` answered messages that cannot be "
                        f"sent ({made}); the request goes as it was"
                    )
                    result = msgspec.structs.replace(result, outcome="garbage", line=line)
                else:
                    request = made
                    line = (
                        f"PreRequest hook `{spec.shown}` replaced the messages of this "
                        f"request ({len(made.messages)} messages sent, the system prompt "
                        "included; the transcript is unchanged)"
                    )
                    result = msgspec.structs.replace(result, line=line)
            results.append(result)
            if blocked is not None:
                break
        key = f"PreRequest:{run.id}:{uuid7()}:"  # every request: a run of its own
        await ex.commit(
            lambda tx: self._record(tx, run.id, key, results, "done"),
            after=lambda out: _track(ex, out),
        )
        if blocked is not None:
            return request, f"PreRequest hook `{blocked.spec.shown}` blocked: {blocked.reason}"
        return request, None

    async def post_response(
        self, ex: RunContext, run: Run, entry: Entry, usage: dict[str, Any]
    ) -> None:
        """PostResponse, once the response `entry` is committed (at most once)."""
        specs = self.hooks.matching("PostResponse")
        prefix = f"PostResponse:{entry.id}:"
        if not specs or await self._ran(ex, run.id, prefix):
            return
        calls = [
            {"tool_name": c.get("name"), "tool_input": _parsed(str(c.get("arguments") or "{}"))}
            for c in entry.data.get("tool_calls", [])
        ]
        text = entry.text if len(entry.text) <= ANSWER_CHARS else entry.text[:ANSWER_CHARS]
        payload = self._payload(
            ex, "PostResponse", last_assistant_message=text,
            message_cut=len(entry.text) > ANSWER_CHARS, tool_calls=calls, usage=usage,
        )  # fmt: skip
        await self._effects(ex, run.id, prefix, specs, payload, None)

    async def post_tool_batch(self, ex: RunContext, run: Run, entry: Entry) -> str | None:
        """PostToolBatch, once every call of the round `entry` asked for has its result
        (at most once): None, or the line saying which hook stopped the run."""
        specs = self.hooks.matching("PostToolBatch")
        prefix = f"PostToolBatch:{entry.id}:"
        if not specs or await self._ran(ex, run.id, prefix):
            return None
        calls = []
        for asked in entry.data.get("tool_calls", []):
            call = await ex.store.tool_call(str(asked.get("key")))
            if call is not None:
                response = _response(ex, call.id)
                calls.append(
                    {"tool_name": call.name, "tool_input": _args(call), "tool_response": response}
                )
        payload = self._payload(ex, "PostToolBatch", tool_calls=calls)
        results = await self._effects(ex, run.id, prefix, specs, payload, None)
        block = next((r for r in results if r.decision == "block"), None)
        if block is None:
            return None
        return f"stopped by PostToolBatch hook `{block.spec.shown}`: {block.reason[:500]}"

    async def _ran(self, ex: RunContext, run_id: str, prefix: str) -> bool:
        """Whether an at-most-once point already started (only a resumed run can have)."""
        if run_id not in self._resumed:
            return False
        rows = await ex.store.read(lambda db: _rows(db, ex.conversation_id, run_id, prefix))
        return bool(rows)


def _response(ex: RunContext, call_id: str) -> dict[str, Any]:
    """A call's result as the model was given it (its result entry), capped."""
    found = [
        e for e in ex.entries
        if e.kind == EntryKind.TOOL_RESULT and e.data.get("tool_call_id") == call_id
    ]  # fmt: skip
    if not found:
        return {"ok": False, "text": ""}
    text = found[-1].text
    out: dict[str, Any] = {"ok": bool(found[-1].data.get("ok")), "text": text[:RESULT_CHARS]}
    if len(text) > RESULT_CHARS:
        out["text_cut"] = f"{len(text) - RESULT_CHARS} more characters are not shown"
    return out


def _parsed(text: str, otherwise: Any = ...) -> Any:
    """`text` as JSON; else `otherwise` (the text itself when not given)."""
    try:
        return json.loads(text)
    except ValueError:
        return text if otherwise is ... else otherwise
