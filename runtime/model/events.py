"""Events: what the harness publishes. Plain frozen data, round-trippable.

Durable events are ledger rows: each carries the conversation `version` it
created (the ledger seq) and is published only after its commit. Transient
events (deltas) carry (run_id, epoch, seq) and are never stored; `seq` counts
from 1 per run and `epoch` per process, so a reader can tell a gap from a
restart.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from runtime.model.jobs import JobRecord
from runtime.model.records import Conversation, Entry, InboxItem, Run, ToolCallRecord


class ConversationCreated(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "conversation.created"
    conversation_id: str
    version: int
    conversation: Conversation


class ConversationUpdated(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "conversation.updated"
    conversation_id: str
    version: int
    conversation: Conversation


class EntryAdded(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "entry.added"
    conversation_id: str
    version: int
    entry: Entry


class EntryTextAppended(msgspec.Struct, frozen=True):
    """A checkpoint of streamed text: `text` was appended at character `offset`."""

    type: ClassVar[str] = "entry.text_appended"
    conversation_id: str
    version: int
    entry_id: str
    offset: int
    text: str


class EntryReasoningAppended(msgspec.Struct, frozen=True):
    """A checkpoint of streamed reasoning: `text` was appended at character `offset`."""

    type: ClassVar[str] = "entry.reasoning_appended"
    conversation_id: str
    version: int
    entry_id: str
    offset: int
    text: str


class EntryClosed(msgspec.Struct, frozen=True):
    """A streamed entry ended with `status`: its text is the `length` characters its
    checkpoints appended (not repeated here), its reasoning and tool calls are in `data`."""

    type: ClassVar[str] = "entry.closed"
    conversation_id: str
    version: int
    entry_id: str
    status: str
    data: dict[str, Any]
    length: int


class ToolOutputAppended(msgspec.Struct, frozen=True):
    """A checkpoint of a running call's output: `text` appended at character `offset`."""

    type: ClassVar[str] = "tool_call.output_appended"
    conversation_id: str
    version: int
    tool_call_id: str
    offset: int
    text: str


class EntryUpdated(msgspec.Struct, frozen=True):
    """An entry's status, and its whole text and data, changed (completion, reset)."""

    type: ClassVar[str] = "entry.updated"
    conversation_id: str
    version: int
    entry: Entry


class RunUpdated(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "run.updated"
    conversation_id: str
    version: int
    run: Run


class ToolCallUpdated(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "tool_call.updated"
    conversation_id: str
    version: int
    tool_call: ToolCallRecord


class InboxUpdated(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "inbox.updated"
    conversation_id: str
    version: int
    item: InboxItem


class LeaseChanged(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "lease.changed"
    conversation_id: str
    version: int
    owner: str | None
    pid: int | None
    token: int


class RulesUpdated(msgspec.Struct, frozen=True):
    """The conversation's session approval rules, all of them, after one was added."""

    type: ClassVar[str] = "rules.updated"
    conversation_id: str
    version: int
    rules: list[dict[str, Any]]


class HookRan(msgspec.Struct, frozen=True):
    """A configured hook (runtime.hooks) for one event of run `run_id`: `state`
    "started" before a hook that runs at most once, "done" with its `outcome` (ok,
    block, approve, failed, timeout, garbage), or "interrupted" (bastion stopped while
    it ran; it is not run again). `key` names the event and what it ran for."""

    type: ClassVar[str] = "hook.ran"
    conversation_id: str
    version: int
    run_id: str
    key: str
    hook_event: str
    command: str
    state: str
    outcome: str


class TodosUpdated(msgspec.Struct, frozen=True):
    """The conversation's todo list (runtime.plan), all of it, after a `todo` call."""

    type: ClassVar[str] = "todos.updated"
    conversation_id: str
    version: int
    todos: list[dict[str, Any]]


class JobUpdated(msgspec.Struct, frozen=True):
    """A background job (runtime.model.jobs) started or ended. Its live output is not
    an event: it goes to the job's artifact, which read_output and /jobs read."""

    type: ClassVar[str] = "job.updated"
    conversation_id: str
    version: int
    job: JobRecord


DurableEvent = (
    ConversationCreated
    | ConversationUpdated
    | EntryAdded
    | EntryTextAppended
    | EntryUpdated
    | EntryReasoningAppended
    | EntryClosed
    | ToolOutputAppended
    | RunUpdated
    | ToolCallUpdated
    | InboxUpdated
    | LeaseChanged
    | RulesUpdated
    | HookRan
    | TodosUpdated
    | JobUpdated
)


class TextDelta(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "text.delta"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    entry_id: str
    offset: int
    text: str


class ReasoningDelta(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "reasoning.delta"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    entry_id: str
    text: str


class ToolOutputDelta(msgspec.Struct, frozen=True):
    type: ClassVar[str] = "tool.output"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    tool_call_id: str
    text: str


class AttemptReset(msgspec.Struct, frozen=True):
    """A retried model request starts over: drop the partial of `entry_id`."""

    type: ClassVar[str] = "attempt.reset"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    entry_id: str
    attempt: int
    reason: str
    delay: float = 0.0  # seconds until the retried request is sent


class CompactionProgress(msgspec.Struct, frozen=True):
    """The run is compacting its conversation before its next model request.

    `phase`: started (with what is summarised: `entries`, about `tokens`), writing
    (`written` characters of summary so far), then done (`freed` tokens: what the
    summarised entries took less the summary), cancelled (Esc: the run goes on
    uncompacted) or failed (`message`). The summary itself is a durable entry.
    `background`: made while the run goes on (runtime.run.compacting)."""

    type: ClassVar[str] = "compaction.progress"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    phase: str
    entries: int = 0
    tokens: int = 0
    written: int = 0
    freed: int = 0
    message: str = ""
    background: bool = False


class SettingsChanged(msgspec.Struct, frozen=True):
    """A client switched the model or approval mode the driving process runs the
    conversation with (the mode is never stored: every client of that process is told,
    so each screen shows what the next call will be decided by). Not part of a run's
    stream: the reducer passes it by."""

    type: ClassVar[str] = "settings.changed"
    conversation_id: str
    model: str
    approval_mode: str


class SessionFailed(msgspec.Struct, frozen=True):
    """A storage error ended the harness (seed 004's `session_failed`): every run it
    drove stopped without writing more, every op after this is refused with the typed
    `SessionFailedError`, and the harness closes. Published once, to every subscriber
    (`conversation_id`: the session the subscriber follows). `reason` is the store
    error's code (store_full, store_io, store_locked, store_corrupt, store_read_only,
    store); `message` says what failed in one line and `hint` what to do next. Never
    stored (the store is what failed); the reducer passes it by."""

    type: ClassVar[str] = "session.failed"
    conversation_id: str
    reason: str
    message: str
    hint: str


TransientEvent = (
    TextDelta | ReasoningDelta | ToolOutputDelta | AttemptReset | CompactionProgress
    | SettingsChanged | SessionFailed
)  # fmt: skip
Event = DurableEvent | TransientEvent

_RECORD_FIELDS: dict[str, type[Any]] = {
    "conversation": Conversation,
    "entry": Entry,
    "run": Run,
    "tool_call": ToolCallRecord,
    "item": InboxItem,
    "job": JobRecord,
}

EVENT_TYPES: dict[str, type[Any]] = {
    cls.type: cls
    for cls in (
        ConversationCreated,
        ConversationUpdated,
        EntryAdded,
        EntryTextAppended,
        EntryUpdated,
        EntryReasoningAppended,
        EntryClosed,
        ToolOutputAppended,
        RunUpdated,
        ToolCallUpdated,
        InboxUpdated,
        LeaseChanged,
        RulesUpdated,
        HookRan,
        TodosUpdated,
        JobUpdated,
        TextDelta,
        ReasoningDelta,
        ToolOutputDelta,
        AttemptReset,
        CompactionProgress,
        SettingsChanged,
        SessionFailed,
    )
}


_DEFAULTED = frozenset({"delay", "entries", "tokens", "written", "freed", "message"})


def is_durable(event: Event) -> bool:
    return hasattr(event, "version")


def event_to_dict(event: Event) -> dict[str, Any]:
    """`{"type": ..., fields...}` with nested records as dicts."""
    out: dict[str, Any] = {"type": event.type}
    for name in event.__struct_fields__:
        value = getattr(event, name)
        out[name] = value.to_dict() if name in _RECORD_FIELDS else value
    return out


def event_from_dict(data: dict[str, Any]) -> Event:
    cls = EVENT_TYPES.get(data.get("type", ""))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    kwargs: dict[str, Any] = {}
    for name in cls.__struct_fields__:
        if name not in data and name in _DEFAULTED:
            continue  # a field added later: older ledger rows take its default
        value = data[name]
        record = _RECORD_FIELDS.get(name)
        kwargs[name] = record.from_dict(value) if record is not None else value
    return cls(**kwargs)  # type: ignore[no-any-return]
