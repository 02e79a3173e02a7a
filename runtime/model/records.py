"""The stored records: plain frozen values. Identity is a storage concern.

They are `msgspec.Struct`s, not dataclasses, as are the other values the runtime defines
on every process's start-up path: a Struct class is defined in about a tenth of the time
a dataclass takes, and a `bastion -p` defines some sixty of them before it answers.

Each record converts to and from a JSON-able dict, because every record also
travels inside a ledger event and in the protocol's messages (`runtime.model.protocol`).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Self

import msgspec


class EntryKind(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    SUMMARY = "summary"
    RESET = "reset"
    NOTE = "note"


class EntryStatus(StrEnum):
    STREAMING = "streaming"
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = {RunState.COMPLETED, RunState.INTERRUPTED, RunState.FAILED, RunState.CANCELLED}


class InboxMode(StrEnum):
    PROMPT = "prompt"  # starts a run now if the conversation is idle, else queues as follow-up
    STEER = "steer"  # joins the running work after the current tool round
    FOLLOW_UP = "follow_up"  # starts the next run when this one answers
    # Urgent: the running run stops at its next safe point (after the tool calls of its
    # current step; a stream is cut) and this runs before ordinary queued work, FIFO
    # among urgent items (seed 000's interrupt-next; runtime.run.urgent).
    INTERRUPT_NEXT = "interrupt_next"


class InboxState(StrEnum):
    QUEUED = "queued"
    PLACED = "placed"
    WITHDRAWN = "withdrawn"
    # Queued behind a run that failed: waits for the user to send it (Harness.send_held)
    # or withdraw it, instead of starting at once (issue 25, item 13).
    HELD = "held"


ACTIVE_RUN_STATES = (RunState.QUEUED, RunState.RUNNING, RunState.AWAITING_APPROVAL)


class ToolCallState(StrEnum):
    PENDING = "pending"  # intent committed, not yet started (may await approval)
    RUNNING = "running"
    DONE = "done"
    DENIED = "denied"
    INTERRUPTED = "interrupted"


class Approval(StrEnum):
    NOT_REQUIRED = "not_required"
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


#: The reason a superseded run ends with (seed 000: terminal reason `superseded`).
SUPERSEDED = "superseded"
#: The data key of the note entry that supersedes a run: the run's id.
SUPERSEDES = "supersedes"


def superseded_runs(entries: Iterable[Entry]) -> frozenset[str]:
    """The runs whose work is discarded from the model's context (kept in the record):
    each named by a note entry bastion wrote when the user superseded it. Only a note's
    data counts, never text (a tool result or a prompt saying so changes nothing)."""
    return frozenset(
        str(e.data[SUPERSEDES])
        for e in entries
        if e.kind == EntryKind.NOTE and isinstance(e.data.get(SUPERSEDES), str)
    )


class _Record(msgspec.Struct, frozen=True):
    """to_dict/from_dict for the frozen record Structs below."""

    def to_dict(self) -> dict[str, Any]:
        # A deep copy, as dataclasses.asdict gave: a caller may change what it gets.
        return {name: _copied(getattr(self, name)) for name in self.__struct_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = cls.__struct_fields__
        return cls(**{k: v for k, v in data.items() if k in names})

    def but(self, **changes: Any) -> Self:
        return msgspec.structs.replace(self, **changes)


def _copied(value: Any) -> Any:
    """`value` with each dict, list and tuple in it copied (the JSON-able values in a
    record's fields; anything else is kept, as immutable)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_copied(v) for v in value)
    return value


class AgentSettings(_Record, frozen=True):
    model: str = ""
    approval_mode: str = "ask"
    instructions: str = ""
    reasoning_effort: str = ""  # runtime.run.reasoning.EFFORTS; "" the config's or the model's


class Conversation(_Record, frozen=True):
    id: str
    title: str
    cwd: str
    settings: dict[str, Any]
    created_at: float
    updated_at: float
    parent_id: str | None = None
    fork_seq: int | None = None
    version: int = 0

    @property
    def agent(self) -> AgentSettings:
        return AgentSettings.from_dict(self.settings)


class SessionSettings(msgspec.Struct, frozen=True):
    """What a process runs a conversation with: the model spec and the approval mode.
    (Here, with the records, so that the app decodes it without loading the harness.)"""

    model: str
    approval_mode: str


class SessionSummary(msgspec.Struct, frozen=True):
    """A conversation as a session list shows it: the record and how many entries it has."""

    conversation: Conversation
    entries: int


class Entry(_Record, frozen=True):
    id: str
    conversation_id: str
    position: int
    kind: str
    status: str
    text: str
    created_at: float
    run_id: str | None = None
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class Run(_Record, frozen=True):
    id: str
    conversation_id: str
    inbox_id: str
    state: str
    created_at: float
    updated_at: float
    revision: int = 0
    reason: str | None = None
    error: dict[str, Any] | None = None
    usage: dict[str, Any] = msgspec.field(default_factory=dict)
    result_entry_id: str | None = None
    # Committed before anything is cancelled, so any process can ask for it.
    interrupt_requested: bool = False

    @property
    def terminal(self) -> bool:
        return RunState(self.state).terminal


class InboxItem(_Record, frozen=True):
    id: str
    conversation_id: str
    mode: str
    text: str
    state: str
    created_at: float
    request_key: str | None = None
    run_id: str | None = None
    entry_id: str | None = None


class ToolCallRecord(_Record, frozen=True):
    id: str
    conversation_id: str
    run_id: str
    entry_id: str
    index: int
    name: str
    arguments: str
    replay_safe: bool
    approval: str
    state: str
    created_at: float
    updated_at: float
    result: dict[str, Any] | None = None
    result_entry_id: str | None = None
    # The id the provider gave this call: data, never a key (providers repeat ids).
    # Ledger events written before it existed have none; their `id` was the provider's.
    provider_id: str = ""
    # What a running command started (process group, start time), to reap it on resume.
    process: dict[str, Any] | None = None
    # What the user was shown and said: {"diff", "note"} of a write or edit computed
    # when the call was recorded, "allowed_by" (the rules that let it run without
    # asking), "message" (a denial's words to the model), "refusal" (why it never asked).
    review: dict[str, Any] | None = None

    @property
    def wire_id(self) -> str:
        return self.provider_id or self.id

    @property
    def unfinished(self) -> bool:
        return self.state in (ToolCallState.PENDING, ToolCallState.RUNNING)
