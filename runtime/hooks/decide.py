"""What a hook's exit code and output mean, as Claude Code users know them.

- exit 0: no objection. stdout, if any, is a JSON object with the decision:
  `{"decision": "block" | "approve", "reason": "..."}`, or Claude Code's newer
  `{"hookSpecificOutput": {"permissionDecision": "allow" | "deny" | "ask",
  "permissionDecisionReason": "...", "additionalContext": "..."}}`. For
  UserPromptSubmit and SessionStart plain text on stdout is context for the model.
  A PreToolUse answer may rewrite the call (`hookSpecificOutput.updatedInput`: the
  whole new arguments, a JSON object; anything else blocks the call); a PostToolUse
  answer may replace the result the model sees (`hookSpecificOutput.updatedToolOutput`,
  or Claude Code's `updatedMCPToolOutput`: text, or any JSON value sent as JSON),
  kept up to REPLACEMENT_LIMIT characters. A PreCompact answer's
  `hookSpecificOutput.customInstructions` is added to the summary's
  instructions; "block" stops an automatic compaction. A PreRequest answer's
  `hookSpecificOutput.messages` replaces the messages of one request (checked in
  runtime.hooks.requests).
- exit 2: block; stderr is the reason.
- any other exit: the hook failed; one line says so.

A hook that ran out of time, could not start, exited with another code, printed
more than the cap, bytes that are not UTF-8, or stdout that is not a JSON object
where one is expected gives one line and never raises. What that failure decides:
a PreToolUse hook guards a call, and a guard that fails does not let the call
through: it blocks, saying why (fail closed). A PreToolUse hook with
`fail_open = true` lets it through instead, as Claude Code does; any other event's
failure decides nothing.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from runtime.hooks.config import HookSpec
from runtime.hooks.process import OUTPUT_CAP, HookOutput

REASON_LIMIT = 4_000  # characters of a reason or of context kept
CONTEXT_EVENTS = ("UserPromptSubmit", "SessionStart")
REPLACEMENT_LIMIT = 64 * 1024  # characters of a replaced result kept (tools' output cap)
_REPLACES = ("updatedToolOutput", "updatedMCPToolOutput")
_PERMISSION = {"allow": "approve", "deny": "block", "ask": ""}


class HookResult(msgspec.Struct, frozen=True):
    """One hook's answer. `decision`: "block", "approve" or "" (none). `reason`: why it
    blocked (or the feedback it gave); `context`: text for the model; `line`: what the
    transcript shows ("" when nothing is worth a line); `outcome`: one word for the
    ledger (ok, block, approve, failed, timeout, garbage)."""

    spec: HookSpec
    outcome: str
    decision: str = ""
    reason: str = ""
    context: str = ""
    line: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    updated: str | None = None  # PreToolUse: the new arguments (JSON); PostToolUse: the result

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.spec.event, "command": self.spec.command, "source": self.spec.source,
            "outcome": self.outcome, "decision": self.decision, "reason": self.reason,
            "context": self.context, "exit_code": self.exit_code,
            "duration_ms": self.duration_ms,
            **({"updated": self.updated[:REASON_LIMIT]} if self.updated is not None else {}),
        }  # fmt: skip


FAILURES = ("failed", "timeout", "garbage")


def interpret(spec: HookSpec, out: HookOutput) -> HookResult:
    """The answer of hook `spec` from what it did (a failed guard blocks: the module)."""
    result = _interpret(spec, out)
    if result.outcome in FAILURES and spec.event == "PreToolUse" and not spec.fail_open:
        said = result.line.removesuffix("; no decision").removesuffix(" (no decision)")
        said = said.removesuffix("; ignored")
        reason = (
            f"{said}. The call is blocked: a guard hook that fails does not let calls "
            "through (fix the hook, or set fail_open = true in its [[hooks.PreToolUse]] "
            "table to let calls through when it fails)"
        )
        line = f"{said}; the call is blocked (fail_open = true would let it through)"
        return msgspec.structs.replace(result, decision="block", reason=reason, line=line)
    return result


def _interpret(spec: HookSpec, out: HookOutput) -> HookResult:
    name = f"{spec.event} hook `{spec.shown}`"
    base: dict[str, Any] = {"exit_code": out.exit_code, "duration_ms": out.duration_ms}
    if out.error:
        return HookResult(spec, "failed", line=f"{name}: {out.error}; no decision", **base)
    if out.timed_out:
        line = (
            f"{name} ran past its {spec.timeout:g} s limit and was killed with everything "
            "it started; no decision (raise its timeout in [[hooks.…]] if it needs longer)"
        )
        return HookResult(spec, "timeout", line=line, **base)
    stderr = _text(out.stderr)
    if out.exit_code == 2:
        reason = stderr or f"blocked by {name} (it gave no reason on stderr)"
        return HookResult(
            spec, "block", "block", reason, line=f"{name} blocked: {_first(reason)}", **base
        )
    if out.exit_code != 0:
        why = f": {_first(stderr)}" if stderr else ""
        line = f"{name} failed (exit {out.exit_code}){why}; no decision"
        return HookResult(spec, "failed", line=line, **base)
    return _stdout(spec, name, out, base)


def _stdout(spec: HookSpec, name: str, out: HookOutput, base: dict[str, Any]) -> HookResult:
    if out.stdout_over:
        line = f"{name} printed more than {OUTPUT_CAP // 1024} KiB on stdout; ignored (no decision)"
        return HookResult(spec, "garbage", line=line, **base)
    try:
        text = out.stdout.decode("utf-8").strip()
    except UnicodeDecodeError:
        line = f"{name} printed bytes that are not UTF-8 on stdout; ignored (no decision)"
        return HookResult(spec, "garbage", line=line, **base)
    if not text:
        return HookResult(spec, "ok", **base)
    if not text.startswith("{") and spec.event in CONTEXT_EVENTS:
        return HookResult(spec, "ok", context=text[:REASON_LIMIT], **base)
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        line = (
            f"{name} printed something other than a JSON object on stdout; ignored "
            "(no decision). Send other output to stderr or /dev/null"
        )
        return HookResult(spec, "garbage", line=line, **base)
    return _answer(spec, name, answer, base)


def _answer(spec: HookSpec, name: str, answer: dict[str, Any], base: dict[str, Any]) -> HookResult:
    specific = answer.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision = answer.get("decision")
    permission = specific.get("permissionDecision")
    if decision is None and permission in _PERMISSION:
        decision = _PERMISSION[permission] or None
    reason = answer.get("reason", specific.get("permissionDecisionReason", ""))
    context = specific.get("additionalContext", "")
    if spec.event == "PreCompact":  # Claude Code's field: instructions for the summary
        context = specific.get("customInstructions", context)
    if (
        decision not in (None, "block", "approve")
        or not isinstance(reason, str)
        or not isinstance(context, str)
    ):
        line = (
            f'{name} answered with a wrong "decision" (use "block" or "approve"), or a '
            '"reason" or "additionalContext" that is not a string; ignored (no decision)'
        )
        return HookResult(spec, "garbage", line=line, **base)
    reason, context = reason.strip()[:REASON_LIMIT], context.strip()[:REASON_LIMIT]
    if decision != "block":
        updated = _updated(spec, name, specific, base)
        if isinstance(updated, HookResult):
            return updated
        base = {**base, "updated": updated}
    if decision == "block":
        reason = reason or f"blocked by {name} (it gave no reason)"
        return HookResult(
            spec, "block", "block", reason, context, f"{name} blocked: {_first(reason)}", **base
        )
    if decision == "approve":
        return HookResult(spec, "approve", "approve", reason, context, **base)
    return HookResult(spec, "ok", reason=reason, context=context, **base)


def _updated(
    spec: HookSpec, name: str, specific: dict[str, Any], base: dict[str, Any]
) -> str | HookResult | None:
    """What the answer rewrites: new arguments (PreToolUse), a new result (PostToolUse),
    None for nothing; a block when new arguments are not a JSON object."""
    if spec.event == "PreToolUse" and "updatedInput" in specific:
        value = specific["updatedInput"]
        if not isinstance(value, dict):
            kind = "null" if value is None else type(value).__name__
            reason = (
                f"{name} rewrote the call's arguments into something that is not a JSON "
                f"object (a {kind}); the call is blocked (fix the hook's updatedInput)"
            )
            return HookResult(spec, "block", "block", reason, line=reason, **base)
        return json.dumps(value, ensure_ascii=False)
    if spec.event == "PreRequest" and "messages" in specific:  # checked by hooks.requests
        return json.dumps(specific["messages"], ensure_ascii=False)
    if spec.event == "PostToolUse":
        key = next((k for k in _REPLACES if k in specific), None)
        if key is not None:
            value = specific[key]
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if len(text) > REPLACEMENT_LIMIT:
                cut = len(text) - REPLACEMENT_LIMIT
                text = (
                    text[:REPLACEMENT_LIMIT]
                    + f"\n[{cut} more characters of the hook's replacement were cut off]"
                )
            return text
    return None


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()[:REASON_LIMIT]


def _first(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
