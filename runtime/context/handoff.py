"""Reset with a handoff note (seed 004: "a reset starts a new context from a note the
model writes").

The model reads its current context (what a request would send it: after the newest
reset, the summary in force, a superseded run's work left out) as a transcript, and
writes a note to the model that continues: the goal, what is done, what is open, the
exact paths, commands and decisions it needs. The note becomes a `reset` entry with
`handoff` in its data; from then on the model sees that entry onward only, the note
first (runtime.context.messages). Nothing is deleted: the old context stays in the
record, the transcript and export.

How it differs: `/compact` keeps the recent turns verbatim and puts a third-person
summary of the older ones before them; `/new` starts a new, empty conversation. A
reset stays in the same session, keeps nothing verbatim, and starts from the model's
own words to its successor.

Durability: the note is written from one snapshot at version V and committed only if
the conversation is still at V with no run going and no input queued
(runtime.harness.resetting). A failure (the model errs or writes nothing, a crash
before the commit, a change meanwhile) leaves the context exactly as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.context.catalog import ModelInfo, cost_of
from runtime.context.compaction import Plan, newest_summary, transcript
from runtime.context.superseded import without_superseded
from runtime.context.tokens import estimate_usage
from runtime.model.errors import ResetFailed
from runtime.model.llm import (
    Message,
    ModelRequest,
    Provider,
    ProviderError,
    TextChunk,
    Usage,
    UsageReport,
)
from runtime.model.records import Entry, EntryKind
from runtime.model.results import Quality
from runtime.store.surrogates import valid_stream

__all__ = ["HANDOFF_SYSTEM", "NOTE_MAX_TOKENS", "handoff_request", "in_context", "write_note"]

NOTE_MAX_TOKENS = 4_096

HANDOFF_SYSTEM = """\
You are Bastion, a coding agent, at the end of a context. The user asked for a reset:
a fresh context will start from a handoff note you write now, and you will not see
anything of this context but that note. Write it to yourself as the agent who carries
on: the user's goal and constraints, what is done (files changed, with paths), what
is open and the next step, commands that matter and their outcomes, decisions and
why, exact identifiers and values. Leave out what no longer matters. Plain Markdown,
at most about 800 words. Do not call tools."""


def in_context(entries: Sequence[Entry]) -> list[Entry]:
    """The entries the model sees now: from the newest reset, the newest summary and
    what follows what it covers, a superseded run's work left out."""
    start = 0
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == EntryKind.RESET:
            start = i
            break
    return without_superseded(entries[start:])


def handoff_request(
    model: str, entries: Sequence[Entry], instructions: str | None, chars: int
) -> ModelRequest | None:
    """The request for the note; None when the context holds nothing to hand off."""
    active = in_context(entries)
    summary = newest_summary(active)
    through = int(summary.data.get("through", summary.position - 1)) if summary else 0
    body = tuple(e for e in active if e.kind != EntryKind.SUMMARY and e.position > through)
    reset = next((e for e in active if e.kind == EntryKind.RESET and e.text), None)
    if not body and summary is None and reset is None:
        return None
    if reset is not None and body and body[0] is reset:  # the note this context began from
        body = body[1:]
    head = reset if summary is None else summary
    plan = Plan(head, body, body[-1].position if body else through, 0)
    ask = "Write the handoff note now."
    if instructions:
        ask += f"\nThe user asks the note to focus on: {instructions}"
    messages = (
        Message("system", HANDOFF_SYSTEM),
        Message("user", transcript(plan, chars) + "\n\n" + ask),
    )
    return ModelRequest(model, messages, (), max_tokens=NOTE_MAX_TOKENS)


async def write_note(
    provider: Provider, request: ModelRequest, info: ModelInfo
) -> tuple[str, dict[str, Any]]:
    """The note and the usage of the request that wrote it; ResetFailed (one line)
    when the model fails or writes nothing."""
    parts: list[str] = []
    usage: Usage | None = None
    try:
        async for item in valid_stream(provider.stream(request)):
            if isinstance(item, TextChunk):
                parts.append(item.text)
            elif isinstance(item, UsageReport):
                usage = item.usage
    except ProviderError as exc:
        raise ResetFailed(
            f"the handoff note could not be written ({exc.message}): nothing was reset",
            hint="the context is as it was; try /reset again, or /compact or /new",
        ) from exc
    text = "".join(parts).strip()
    if not text:
        raise ResetFailed(
            "the model wrote an empty handoff note: nothing was reset",
            hint="the context is as it was; try /reset again",
        )
    quality = Quality.MEASURED
    if usage is None:
        usage, quality = estimate_usage(request.messages, text)
    if usage.cost is None:
        cost = cost_of(info, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        usage = Usage(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
                      usage.reasoning_tokens, cost)  # fmt: skip
    record = usage.to_dict()
    record.update(quality=str(quality), model=info.spec)
    return text, record
