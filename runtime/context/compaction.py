"""Compaction: a long conversation's older turns replaced, in requests, by a summary.

Nothing is deleted. A summary is one more entry (kind `summary`) whose data
says which entries it covers: every entry at a position up to `through`. The
request builder (runtime.context.messages) sends the newest summary in place of those
entries, followed verbatim by the rest; export and the transcript still show
every original, marked as compacted (`compacted_through`).

What is compacted: whole turns only. The cut is always just before a user
entry, never inside a run that is still going, and never between a tool call
and its result; roughly the last `keep_tokens` (20k, or a quarter of the
budget on a small window) stay verbatim. The previous summary is part of what
the new one summarises, so knowledge carries forward.

Durability: the summary is computed from one consistent snapshot at version
V and written in one transaction only if the conversation is still at V (a
compare-and-set on the version). A conflicting write means the summary may be
stale: it is thrown away and recomputed from a fresh snapshot, up to
`ATTEMPTS` times; a stale summary is never applied. A crash before that
commit leaves the conversation as it was; after it, the summary's EntryAdded
event replays through the reducer like any other entry.

When: in the background once a request's estimate passes BACKGROUND_AT of the budget
(runtime.run.compacting: the run goes on and uses the summary from the request after
it lands); automatically before a model request whose estimate exceeds the window
minus the reserve (`compact_reserve_tokens`, default 16,384, at most a quarter
of the window), once after a provider's context-overflow error (then the
request is retried once), and on demand (`Harness.compact`, `bastion compact
ID`, `/compact`). The summary is written by `compact_model` when configured,
else by the conversation's own model.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from runtime.context.catalog import ModelInfo, cost_of
from runtime.context.superseded import without_superseded
from runtime.context.tokens import count_text, estimate_usage
from runtime.model.errors import CompactionFailed
from runtime.model.ids import uuid7
from runtime.model.llm import (
    Message,
    ModelRequest,
    Provider,
    ProviderError,
    TextChunk,
    Usage,
    UsageReport,
)
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.model.results import Quality
from runtime.model.todo import with_plan
from runtime.store import failpoints
from runtime.store.database import Store
from runtime.store.surrogates import valid_stream
from runtime.store.tx import Tx

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "DEFAULT_RESERVE",
    "KEEP_TOKENS",
    "CompactionSettings",
    "Compactor",
    "Plan",
    "Progress",
    "compacted_through",
    "exceeds",
    "plan_compaction",
    "reserve_for",
]

KEEP_TOKENS = 20_000
DEFAULT_RESERVE = 16_384
ATTEMPTS = 3
SUMMARY_MAX_TOKENS = 4_096
_RESULT_CHARS = 2_000  # of each tool result, in the text the summariser reads

SUMMARY_SYSTEM = """\
You write the running summary of a coding session between a user and Bastion, a
coding agent. Another model will continue the session from your summary alone,
so keep everything it needs: the user's goals and constraints, decisions made and
why, files read and changed (with paths), commands run and their outcomes, errors
met and how they were resolved, and what was still open or planned next. Quote
exact identifiers, paths and values. Leave out pleasantries and tool-call noise.
Write plain Markdown, at most about 1,500 words. Do not call tools."""


class CompactionSettings(msgspec.Struct, frozen=True):
    """How a conversation is compacted; the summary provider defaults to the run's own."""

    reserve_tokens: int = DEFAULT_RESERVE
    keep_tokens: int = KEEP_TOKENS
    summary_provider: Provider | None = None
    summary_model: str | None = None
    summary_spec: str | None = None


CUT_OFF = "[this answer was interrupted]"  # how an answer that did not complete reads


def reserve_for(window: int, configured: int | None) -> int:
    """Tokens kept free in the window: the configured reserve, at most a quarter of it."""
    return min(configured or DEFAULT_RESERVE, window // 4)


def _newest_reset(entries: Sequence[Entry]) -> int:
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == EntryKind.RESET:
            return i
    return 0


def newest_summary(entries: Sequence[Entry]) -> Entry | None:
    """The summary in force: the newest complete one after the newest reset."""
    start = _newest_reset(entries)
    for i in range(len(entries) - 1, start - 1, -1):
        entry = entries[i]
        if entry.kind == EntryKind.SUMMARY and entry.status == EntryStatus.COMPLETE:
            return entry
    return None


def covered_through(summary: Entry) -> int:
    """The last position a summary covers (an old summary without `through`: all before it)."""
    return int(summary.data.get("through", summary.position - 1))


def compacted_through(entries: Sequence[Entry]) -> int:
    """Entries at or before this position are compacted (0: none are)."""
    summary = newest_summary(entries)
    return covered_through(summary) if summary is not None else 0


def entry_tokens(entry: Entry) -> int:
    """An estimate of what an entry costs in a request (4 characters a token without tiktoken)."""
    text = entry.text
    for call in entry.data.get("tool_calls") or ():
        text += call.get("name", "") + call.get("arguments", "")
    counted = count_text(text)
    return counted.tokens if counted.tokens is not None else len(text) // 4 + 1


class Plan(msgspec.Struct, frozen=True):
    """What one compaction covers: `compact` (after the previous summary's range) up to
    position `through`; entries after it stay verbatim."""

    previous: Entry | None
    compact: tuple[Entry, ...]
    through: int
    kept_tokens: int
    tokens: int = 0  # what the compacted entries (and the summary they replace) take

    def freed(self, summary: str) -> int:
        """Tokens a request saves once `summary` stands in for what this plan covers."""
        counted = count_text(summary).tokens
        return max(0, self.tokens - (counted if counted is not None else len(summary) // 4 + 1))


def _boundaries(candidates: Sequence[Entry], active_run_id: str | None) -> list[int]:
    """Indices i where a cut before candidates[i] separates whole turns."""
    out: list[int] = []
    open_calls: set[str] = set()
    unsettled = False
    for i, entry in enumerate(candidates):
        if entry.kind == EntryKind.USER and i > 0 and not open_calls and not unsettled:
            out.append(i)
        if entry.run_id is not None and entry.run_id == active_run_id:
            unsettled = True  # nothing of the run in progress is compacted but its prompt
        if entry.status == EntryStatus.STREAMING:
            unsettled = True
        if entry.kind == EntryKind.ASSISTANT:
            for call in entry.data.get("tool_calls") or ():
                open_calls.add(call.get("key") or call.get("id"))
        elif entry.kind == EntryKind.TOOL_RESULT:
            open_calls.discard(entry.data.get("tool_call_id"))
    return out


def plan_compaction(
    entries: Sequence[Entry], keep_tokens: int, active_run_id: str | None = None
) -> Plan | None:
    """The latest cut that keeps at least `keep_tokens` verbatim (else the earliest cut);
    None when no whole turn can be compacted."""
    start = _newest_reset(entries)
    previous = newest_summary(entries)
    through = covered_through(previous) if previous is not None else 0
    candidates = [
        e for e in entries[start:] if e.position > through and e.kind != EntryKind.SUMMARY
    ]
    cuts = _boundaries(candidates, active_run_id)
    if not cuts:
        return None
    tail = [0] * (len(candidates) + 1)
    for i in range(len(candidates) - 1, -1, -1):
        tail[i] = tail[i + 1] + entry_tokens(candidates[i])
    chosen = next((c for c in reversed(cuts) if tail[c] >= keep_tokens), cuts[0])
    compact = tuple(candidates[:chosen])
    tokens = tail[0] - tail[chosen] + (entry_tokens(previous) if previous is not None else 0)
    return Plan(previous, compact, compact[-1].position, tail[chosen], tokens)


def transcript(plan: Plan, char_budget: int) -> str:
    """The compacted turns as plain text for the summariser, the oldest dropped first
    when it would not fit (the previous summary always stays)."""
    blocks: list[str] = []
    for entry in without_superseded(plan.compact):  # what was discarded is not summarised
        match entry.kind:
            case EntryKind.USER:
                blocks.append(f"[user]\n{entry.text}")
            case EntryKind.ASSISTANT:
                lines = [f"[assistant]\n{entry.text}"] if entry.text else []
                if lines and entry.status in (EntryStatus.INTERRUPTED, EntryStatus.FAILED):
                    lines.append(CUT_OFF)  # as the normal request reads it (issue 25, 13)
                for call in entry.data.get("tool_calls") or ():
                    lines.append(f"[tool call {call.get('name')}] {call.get('arguments')}")
                if lines:
                    blocks.append("\n".join(lines))
            case EntryKind.TOOL_RESULT:
                text = entry.text
                if len(text) > _RESULT_CHARS:
                    text = (
                        text[:_RESULT_CHARS]
                        + f"\n[... {len(entry.text) - _RESULT_CHARS} more characters]"
                    )
                blocks.append(f"[tool result {entry.data.get('name', '')}]\n{text}")
            case _:
                if entry.text:
                    blocks.append(f"[{entry.kind}]\n{entry.text}")
    head = f"[summary of the session before this]\n{plan.previous.text}" if plan.previous else ""
    room = char_budget - len(head)
    kept: list[str] = []
    for block in reversed(blocks):
        if room - len(block) < 0:
            kept.append(f"[... {len(blocks) - len(kept)} earlier messages left out]")
            break
        room -= len(block) + 2
        kept.append(block)
    return "\n\n".join(([head] if head else []) + list(reversed(kept)))


def summary_request(model: str, plan: Plan, instructions: str | None, chars: int) -> ModelRequest:
    ask = "Write the summary of the session above."
    if instructions:
        ask += f"\nThe user asks you to focus on: {instructions}"
    messages = (
        Message("system", SUMMARY_SYSTEM),
        Message("user", transcript(plan, chars) + "\n\n" + ask),
    )
    return ModelRequest(model, messages, (), max_tokens=SUMMARY_MAX_TOKENS)


async def summarise(
    provider: Provider,
    request: ModelRequest,
    info: ModelInfo,
    on_text: Callable[[int], None] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The summary text and the usage of the request that wrote it. `on_text` is told
    how many characters are written so far, as they arrive."""
    parts: list[str] = []
    written = 0
    usage: Usage | None = None
    try:
        async for item in valid_stream(provider.stream(request)):
            if isinstance(item, TextChunk):
                parts.append(item.text)
                written += len(item.text)
                if on_text is not None:
                    on_text(written)
            elif isinstance(item, UsageReport):
                usage = item.usage
    except ProviderError as exc:
        raise CompactionFailed(
            f"the summary model failed: {exc.message}",
            hint="try again, or set compact_model to another model in config.toml",
        ) from exc
    text = "".join(parts).strip()
    if not text:
        raise CompactionFailed("the summary model wrote nothing", hint="try again")
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


Commit = Callable[[Callable[[Tx], Any]], Awaitable[Any]]


class Progress:
    """What a compaction tells its watcher (runtime.run.loop publishes it as events)."""

    def started(self, plan: Plan) -> None:
        """Summarising `plan` begins (again, after a conflict)."""

    def writing(self, written: int) -> None:
        """`written` characters of the summary have arrived."""


class Compactor:
    """Compacts one conversation: plan from a snapshot, summarise, commit under the
    version check, recompute on conflict. `commit` runs a transaction body (fenced by
    the run's lease token inside a run)."""

    def __init__(
        self,
        store: Store,
        conversation_id: str,
        commit: Commit,
        provider: Provider,
        model: str,
        info: ModelInfo,
        window: int,
        settings: CompactionSettings,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.commit = commit
        self.provider = settings.summary_provider or provider
        self.model = settings.summary_model or model
        self.info = info
        self.window = window
        self.settings = settings

    @property
    def budget(self) -> int:
        """Tokens a request may take: the window less the reserve."""
        return self.window - reserve_for(self.window, self.settings.reserve_tokens)

    @property
    def keep_tokens(self) -> int:
        return min(self.settings.keep_tokens, self.budget // 4)

    async def compact(
        self,
        instructions: str | None = None,
        *,
        active_run_id: str | None = None,
        reason: str = "manual",
        progress: Progress | None = None,
        background: bool = False,
    ) -> Entry | None:
        """Commit one summary; None when there is no whole turn to compact.

        `background`: the run goes on while it is made, adding entries after what it
        summarises, so it commits unless the conversation gained another summary or a
        reset meanwhile (`Tx.context_changed_since`), not only at its snapshot's version."""
        progress = progress or Progress()
        for attempt in range(1, ATTEMPTS + 1):
            snap = await self.store.snapshot(self.conversation_id)
            version = snap.conversation.version
            plan = plan_compaction(snap.entries, self.keep_tokens, active_run_id)
            if plan is None:
                return None
            progress.started(plan)
            request = summary_request(self.model, plan, instructions, self.budget * 3)
            text, usage = await summarise(
                self.provider, request, self._summary_info(), progress.writing
            )
            failpoints.hit("compact.summarised")
            text = with_plan(text, snap.todos)  # the plan outlives the turns that wrote it
            entry = self._entry(plan, text, usage, version, active_run_id, reason, instructions)

            def build(tx: Tx, entry: Entry = entry, version: int = version) -> Entry | None:
                if tx.version != version and (  # the snapshot is stale: so is its summary
                    not background or tx.context_changed_since(version)
                ):
                    return None
                return tx.add_entry(entry)

            added: Entry | None = await self.commit(build)
            if added is not None:
                failpoints.hit("compact.committed")
                return added
            log.info("compaction %d of %s conflicted; recomputing", attempt, self.conversation_id)
        raise CompactionFailed(
            f"conversation {self.conversation_id} kept changing while it was being compacted",
            hint="try again when it is idle",
        )

    def _summary_info(self) -> ModelInfo:
        spec = self.settings.summary_spec
        return (
            self.info
            if spec is None
            else ModelInfo(spec, self.info.context_window, self.info.max_output_tokens, known=False)
        )

    def _entry(
        self,
        plan: Plan,
        text: str,
        usage: dict[str, Any],
        version: int,
        run_id: str | None,
        reason: str,
        instructions: str | None,
    ) -> Entry:
        data: dict[str, Any] = {
            "through": plan.through,
            "from": plan.compact[0].position,
            "compacted": len(plan.compact),
            "kept_tokens": plan.kept_tokens,
            "freed_tokens": plan.freed(text),
            "base_version": version,
            "reason": reason,
            "usage": usage,
        }
        if instructions:
            data["instructions"] = instructions
        return Entry(
            uuid7(), self.conversation_id, 0, EntryKind.SUMMARY, EntryStatus.COMPLETE, text,
            time.time(), run_id=run_id, data=data,
        )  # fmt: skip


def exceeds(request: ModelRequest, budget: int) -> bool:
    """Would `request` take more than `budget` prompt tokens? Counted with tiktoken only
    when a cheap bound (3 characters a token or more) does not settle it."""
    from runtime.context.tokens import count_request, for_model

    tools = len(json.dumps([t.parameters for t in request.tools])) if request.tools else 0
    tools += sum(len(t.name) + len(t.description) for t in request.tools)
    chars, images = tools, 0
    for message in request.messages:
        if isinstance(message.content, str):
            chars += len(message.content)
        else:
            for part in message.content:
                text = getattr(part, "text", None)
                chars, images = (chars + len(text), images) if text else (chars, images + 1)
        chars += sum(len(c.arguments) + len(c.name) for c in message.tool_calls)
    extra = images * 765 + 4 * len(request.messages)
    with_tools = bool(request.tools)
    if for_model(chars // 3 + extra, request.model, tools=with_tools) < budget:
        return False
    counted = count_request(request)
    if counted.tokens is not None:
        return counted.tokens > budget
    return for_model(chars // 4 + extra, request.model, tools=with_tools) > budget
