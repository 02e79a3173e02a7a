"""The one door into the harness: ops in, replies and events out, as plain values.

Every front end speaks this: the app to its harness process, `bastion attach` to a
driving process, `--plain` and print mode to a harness in their own process, and
`bastion acp` (which maps the Agent Client Protocol onto it). Each message is one
JSON object on one line (`runtime.ipc.wire`); the first each way is a hello:

    client → {"hello": {"version": 1, "client": "app", "token": "…"}}
    server → {"hello": {"version": 1, "pid": 4242}}
    client → {"id": 7, "op": "submit", "args": {"conversation": "…", "text": "hi"}}
    server → {"id": 7, "ok": true, "result": {…}}
           | {"id": 7, "ok": false, "error": {"code": "…", "message": "…", "hint": "…"}}
    server → {"sub": 3, "events": [{"type": "text.delta", …}, …]}     (durable and
           | {"sub": 3, "resync": true} | {"sub": 3, "ended": true}    transient, in order)

An op is a frozen `msgspec.Struct` below (not a dataclass: fifty of them are defined
at every start, and a Struct class is made ~20x faster, issue 36); `OPS` names them.
Its arguments are checked against the op's types when a request is decoded (`decode_request`): a
malformed frame, an unknown op or a wrong type is one typed `ProtocolError` for
that request, never a crash. A reply's `result` is the op's `Reply` type as JSON
(`encode_result` / `decode_result`): records, views and results of the model room.
A newer major `VERSION` is refused at hello.

Durable events carry the conversation's ledger sequence; transient ones (text and
reasoning deltas, tool output) their run's stream cursor. A client that falls
behind gets `resync` and reloads a `Snapshot`: the reducer (`runtime.model.views`)
does the rest, the same in every front end.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, ClassVar

import msgspec

from runtime.model.errors import BastionError
from runtime.model.events import event_from_dict, event_to_dict
from runtime.model.jobs import JobRecord
from runtime.model.records import (
    Conversation,
    Entry,
    InboxItem,
    InboxMode,
    Run,
    SessionSettings,
    SessionSummary,
    ToolCallRecord,
)
from runtime.model.results import (
    AgentRecord,
    CloseReport,
    Interruption,
    McpPrompt,
    McpResource,
    McpServerStatus,
    Parked,
    Redirection,
    RestorePlan,
    RestoreReport,
    Rewound,
    SearchHit,
    Supersession,
    UsageSummary,
)
from runtime.model.rules import Rule
from runtime.model.todo import TodoItem
from runtime.model.views import (
    Compacting,
    ConversationView,
    LiveText,
    ReasoningDeltas,
    Retry,
    StreamCursor,
    TextDeltas,
    ViewEvent,
)

__all__ = [
    "OPS",
    "VERSION",
    "Op",
    "ProtocolError",
    "decode_error",
    "decode_event",
    "decode_request",
    "decode_result",
    "encode_error",
    "encode_event",
    "encode_request",
    "encode_result",
    "line",
    "view_from_wire",
    "view_to_wire",
]

VERSION = 1
MAX_LINE = 1 << 26  # bytes of one message (a long session's snapshot is long)


class ProtocolError(BastionError):
    """A frame that is not a message of this protocol (malformed, unknown op, a field
    of the wrong type, a peer of another major version)."""

    code = "protocol"


# --- ops ------------------------------------------------------------------------------


class Op(msgspec.Struct, frozen=True, kw_only=True):
    """One request. `name` is its wire name; `Reply` the type of its result."""

    name: ClassVar[str] = ""
    Reply: ClassVar[Any] = None
    #: Whether it changes what the store holds (the attach socket admits it only from
    #: an authenticated client: runtime.ipc.peer).
    acts: ClassVar[bool] = True


class Submit(Op, frozen=True, kw_only=True):
    name = "submit"
    Reply = InboxItem
    conversation: str
    text: str
    mode: InboxMode = InboxMode.PROMPT
    request_key: str | None = None
    create: Conversation | None = None
    when_busy: str = "queue"  # "reject": the typed Busy while a run goes, nothing admitted


class Write(Op, frozen=True, kw_only=True):
    """Append a user entry without asking the model (the typed Busy while a run goes)."""

    name = "write"
    Reply = Entry
    conversation: str
    text: str


class Withdraw(Op, frozen=True, kw_only=True):
    name = "withdraw"
    Reply = bool
    conversation: str
    item: str


class SendHeld(Op, frozen=True, kw_only=True):
    name = "send_held"
    Reply = tuple[InboxItem, ...]
    conversation: str


class Interrupt(Op, frozen=True, kw_only=True):
    name = "interrupt"
    Reply = Interruption
    conversation: str


class Redirect(Op, frozen=True, kw_only=True):
    name = "redirect"
    Reply = Redirection
    conversation: str
    text: str
    request_key: str | None = None


class Supersede(Op, frozen=True, kw_only=True):
    """End the run going; its unfinished work leaves the model's context, kept in the
    record (runtime.run.redirect); `text`, if any, is the next prompt."""

    name = "supersede"
    Reply = Supersession
    conversation: str
    text: str | None = None
    request_key: str | None = None


class Reset(Op, frozen=True, kw_only=True):
    """A new context from a handoff note the model writes (runtime.context.handoff)."""

    name = "reset"
    Reply = Entry
    conversation: str
    instructions: str | None = None


class Respond(Op, frozen=True, kw_only=True):
    """The user's answer to an approval (only ever from the user: runtime.ipc.peer)."""

    name = "respond"
    Reply = tuple[Rule, ...]
    conversation: str
    tool_call: str
    approve: bool
    always: str | None = None  # "session" | "project"
    message: str | None = None
    sandbox: str | None = None  # "outside" | "network"


class ProposedRules(Op, frozen=True, kw_only=True):
    name = "proposed_rules"
    Reply = tuple[Rule, ...]
    acts = False
    conversation: str
    tool_call: str
    scope: str = "session"


class Rules(Op, frozen=True, kw_only=True):
    name = "rules"
    Reply = tuple[Rule, ...]
    acts = False
    conversation: str


class Compact(Op, frozen=True, kw_only=True):
    name = "compact"
    Reply = Entry | None
    conversation: str
    instructions: str | None = None


class CancelCompaction(Op, frozen=True, kw_only=True):
    name = "cancel_compaction"
    Reply = bool
    conversation: str


class Snapshot(Op, frozen=True, kw_only=True):
    """The conversation's view to start from (with what was streamed but not yet
    checkpointed); `last`: only the newest entries (the rest load as the user scrolls)."""

    name = "snapshot"
    Reply = ConversationView
    acts = False
    conversation: str
    last: int | None = None


class Settings(Op, frozen=True, kw_only=True):
    name = "settings"
    Reply = SessionSettings
    acts = False
    conversation: str


class SetApprovalMode(Op, frozen=True, kw_only=True):
    name = "set_approval_mode"
    Reply = SessionSettings
    conversation: str
    mode: str


class SetModel(Op, frozen=True, kw_only=True):
    name = "set_model"
    Reply = SessionSettings
    conversation: str
    spec: str


class SetReasoningEffort(Op, frozen=True, kw_only=True):
    name = "set_reasoning_effort"
    Reply = str
    conversation: str
    effort: str


class SetDefaults(Op, frozen=True, kw_only=True):
    name = "set_defaults"
    Reply = None
    conversation: str
    model: str | None = None
    approval_mode: str | None = None


class NewSession(Op, frozen=True, kw_only=True):
    name = "new_session"
    Reply = Conversation
    conversation: str  # the one it replaces on this client's screen (its settings carry on)


class SwitchSession(Op, frozen=True, kw_only=True):
    name = "switch_session"
    Reply = Conversation
    conversation: str
    to: str


class Fork(Op, frozen=True, kw_only=True):
    name = "fork"
    Reply = Conversation
    conversation: str
    at_entry: str | None = None


class Rewind(Op, frozen=True, kw_only=True):
    name = "rewind"
    Reply = Rewound
    conversation: str
    entry: str


class PlanRestore(Op, frozen=True, kw_only=True):
    name = "plan_restore"
    Reply = RestorePlan
    acts = False
    conversation: str
    entry: str


class Restore(Op, frozen=True, kw_only=True):
    name = "restore"
    Reply = RestoreReport
    plan: RestorePlan


class Export(Op, frozen=True, kw_only=True):
    name = "export"
    Reply = dict[str, Any]
    acts = False
    conversation: str


class Usage(Op, frozen=True, kw_only=True):
    name = "usage"
    Reply = UsageSummary
    acts = False
    conversation: str


class McpServers(Op, frozen=True, kw_only=True):
    name = "mcp_servers"
    Reply = tuple[McpServerStatus, ...]
    acts = False
    wait: bool = False


class McpPrompts(Op, frozen=True, kw_only=True):
    name = "mcp_prompts"
    Reply = tuple[McpPrompt, ...]
    acts = False


class McpResources(Op, frozen=True, kw_only=True):
    name = "mcp_resources"
    Reply = tuple[McpResource, ...]
    acts = False


class GetMcpPrompt(Op, frozen=True, kw_only=True):
    """A server's prompt as the text of a user message (nothing is sent or stored)."""

    name = "mcp_prompt"
    Reply = str
    acts = False
    server: str
    prompt: str
    arguments: dict[str, str]


class ReadMcpResource(Op, frozen=True, kw_only=True):
    """A listed resource's text and a note (nothing is sent or stored)."""

    name = "mcp_resource"
    Reply = tuple[str, str]
    acts = False
    server: str
    uri: str


class Agents(Op, frozen=True, kw_only=True):
    """The conversation's background subagents (runtime.agents.background), oldest first."""

    name = "agents"
    Reply = tuple[AgentRecord, ...]
    acts = False
    conversation: str


class StopAgent(Op, frozen=True, kw_only=True):
    """Stop a background subagent (its id or description) of a conversation."""

    name = "stop_agent"
    Reply = AgentRecord
    conversation: str
    agent: str


class Jobs(Op, frozen=True, kw_only=True):
    """The conversation's background jobs (runtime.model.jobs), oldest first."""

    name = "jobs"
    Reply = tuple[JobRecord, ...]
    acts = False
    conversation: str


class StopJob(Op, frozen=True, kw_only=True):
    """Stop a background job (`job_N` or `N`) of a conversation this process drives."""

    name = "stop_job"
    Reply = JobRecord
    conversation: str
    job: str
    why: str = "by the user"  # what the record and the model's note say


class Search(Op, frozen=True, kw_only=True):
    name = "search"
    Reply = list[SearchHit]
    acts = False
    query: str
    limit: int = 50


class Sessions(Op, frozen=True, kw_only=True):
    name = "sessions"
    Reply = list[SessionSummary]
    acts = False
    limit: int = 500


class ResolveId(Op, frozen=True, kw_only=True):
    name = "resolve_id"
    Reply = str
    acts = False
    text: str


class ShortIds(Op, frozen=True, kw_only=True):
    name = "short_ids"
    Reply = dict[str, str]
    acts = False
    ids: tuple[str, ...] = msgspec.field(default_factory=tuple)


class WaitRun(Op, frozen=True, kw_only=True):
    """Wait for a run to end (or the inbox item's run, once it has one); its record."""

    name = "wait_run"
    Reply = Run
    acts = False
    conversation: str
    item: str | None = None
    run: str | None = None


class WaitIdle(Op, frozen=True, kw_only=True):
    """Wait until the conversation has no unfinished run or queued input; its latest run
    (the driver's failure, if it stopped)."""

    name = "wait_idle"
    Reply = Run | None
    acts = False
    conversation: str


class GetConversation(Op, frozen=True, kw_only=True):
    name = "conversation"
    Reply = Conversation
    acts = False
    conversation: str


class Answer(Op, frozen=True, kw_only=True):
    """The text of a run's answer (its result entry, else its last assistant text)."""

    name = "answer"
    Reply = str
    acts = False
    conversation: str
    run: str


class RunCalls(Op, frozen=True, kw_only=True):
    name = "run_calls"
    Reply = tuple[ToolCallRecord, ...]
    acts = False
    conversation: str
    run: str


class Subscribe(Op, frozen=True, kw_only=True):
    """The conversation's events from now on, as `{"sub": N, "events": …}` messages,
    N the client's number for it. Taken before any later request is read, so a
    `Snapshot` asked for after it misses nothing."""

    name = "subscribe"
    Reply = None
    acts = False
    conversation: str
    sub: int  # chosen by the client, so its channel exists before the first event
    join: bool = True  # consecutive text deltas joined while they wait (False: each kept)


class Unsubscribe(Op, frozen=True, kw_only=True):
    name = "unsubscribe"
    Reply = None
    acts = False
    sub: int


class Ping(Op, frozen=True, kw_only=True):
    name = "ping"
    Reply = None
    acts = False


class Close(Op, frozen=True, kw_only=True):
    """Close the harness (drivers stopped, leases released): the owner's alone. The
    reply says which conversations settled and which were abandoned (`CloseReport`)."""

    name = "close"
    Reply = CloseReport


class Park(Op, frozen=True, kw_only=True):
    """Stop this harness when the session is idle, its lease handed to process `pid`
    (the app) as a parked lease (runtime.harness.parking): the owner's alone. `Parked`,
    then the harness closes and the connection ends; `NotIdle` and nothing changed
    when there is work."""

    name = "park"
    Reply = Parked
    conversation: str
    pid: int


OPS: dict[str, type[Op]] = {
    cls.name: cls
    for cls in (
        Submit, Write, Withdraw, SendHeld, Interrupt, Redirect, Supersede, Reset, Respond,
        ProposedRules, Rules,
        Compact, CancelCompaction, Snapshot, Settings, SetApprovalMode, SetModel,
        SetReasoningEffort, SetDefaults, NewSession, SwitchSession, Fork, Rewind,
        PlanRestore, Restore, Export, Usage, McpServers, McpPrompts, McpResources, GetMcpPrompt,
        ReadMcpResource, Jobs, StopJob, Agents, StopAgent, Search, Sessions, ResolveId,
        ShortIds, WaitRun, WaitIdle, GetConversation, Answer, RunCalls, Subscribe, Unsubscribe, Ping, Close,
        Park,
    )
}  # fmt: skip


# --- encoding ---------------------------------------------------------------------------


def line(message: dict[str, Any]) -> bytes:
    """One message as a line of JSON (no raw newline inside: JSON escapes them)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _builtins(value: Any) -> Any:
    if isinstance(value, ConversationView):
        return view_to_wire(value)
    return msgspec.to_builtins(value, builtin_types=None, enc_hook=_enc_hook)


def _enc_hook(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise NotImplementedError(f"{type(value).__name__} cannot cross the protocol")


def encode_request(request_id: int, op: Op) -> dict[str, Any]:
    args = {name: _builtins(getattr(op, name)) for name in op.__struct_fields__}
    return {"id": request_id, "op": op.name, "args": args}


def decode_request(message: dict[str, Any]) -> tuple[Any, Op]:
    """(the request's id, its op); ProtocolError (with the id, when there is one) for a
    message that is not a valid request."""
    request_id = message.get("id")
    name = message.get("op")
    cls = OPS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(
            f"unknown op {name!r}",
            hint=f"send one of: {', '.join(sorted(OPS))}",
        )
    args = message.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError(f"the args of {name!r} are not an object")
    try:
        op = msgspec.convert(args, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"bad arguments for {name!r}: {exc}") from None
    return request_id, op


def encode_result(op: Op, value: Any) -> Any:
    return _builtins(value)


def decode_result(op: Op | type[Op], raw: Any) -> Any:
    reply = op.Reply
    if reply is None:
        return None
    if reply is ConversationView:
        return view_from_wire(raw)
    try:
        return msgspec.convert(raw, reply, strict=False)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"a malformed result for {op.name!r}: {exc}") from None


def encode_error(exc: BastionError) -> dict[str, Any]:
    extra = {
        k: v
        for k, v in vars(exc).items()
        if k not in ("message", "hint") and isinstance(v, str | int | float | bool | None)
    }
    return {"code": exc.code, "message": exc.message, "hint": exc.hint, "data": extra}


def decode_error(raw: dict[str, Any]) -> BastionError:
    """The error a reply carries, as the typed exception its code names where this
    process knows it (`BastionError` subclasses), else a `BastionError` with that code."""
    code = str(raw.get("code") or "error")
    cls = _error_classes().get(code)
    exc = BastionError.__new__(cls if cls is not None else BastionError)
    BastionError.__init__(exc, str(raw.get("message") or code), hint=raw.get("hint"))
    data = raw.get("data")
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and key.isidentifier() and not key.startswith("_"):
                setattr(exc, key, value)
    if cls is None:
        exc.code = code  # (an instance attribute: the remote code)
    return exc


def _error_classes() -> dict[str, type[BastionError]]:
    found: dict[str, type[BastionError]] = {}
    todo: list[type[BastionError]] = [BastionError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo.extend(cls.__subclasses__())
    return found


# --- events and views ---------------------------------------------------------------------


def encode_event(event: ViewEvent) -> dict[str, Any]:
    if isinstance(event, TextDeltas | ReasoningDeltas):
        out: dict[str, Any] = {"type": event.type}
        out.update((name, getattr(event, name)) for name in event.__struct_fields__)
        return out
    return event_to_dict(event)


def decode_event(data: dict[str, Any]) -> ViewEvent:
    if data.get("type") == TextDeltas.type:
        return TextDeltas(**{name: data[name] for name in TextDeltas.__struct_fields__})
    if data.get("type") == ReasoningDeltas.type:
        return ReasoningDeltas(**{name: data[name] for name in ReasoningDeltas.__struct_fields__})
    return event_from_dict(data)


def view_to_wire(view: ConversationView) -> dict[str, Any]:
    return {
        "conversation": view.conversation.to_dict(),
        "version": view.version,
        "entries": [e.to_dict() for e in view.entries],
        "runs": [r.to_dict() for r in view.runs],
        "inbox": [i.to_dict() for i in view.inbox],
        "tool_calls": [c.to_dict() for c in view.tool_calls],
        "cursors": {k: [c.epoch, c.seq] for k, c in view.cursors.items()},
        "reasoning": {k: str(v) for k, v in view.reasoning.items()},
        "tool_output": dict(view.tool_output),
        "lease_pid": view.lease_pid,
        "todos": [t.to_dict() for t in view.todos],
        "earlier": view.earlier,
        "rules": [r.to_dict() for r in view.rules],
        "retrying": {k: [r.attempt, r.delay, r.reason] for k, r in view.retrying.items()},
        "compacting": {k: [c.entries, c.tokens, c.written] for k, c in view.compacting.items()},
        "live": {k: str(v) for k, v in view.live.items()},
        "child_calls": [c.to_dict() for c in view.child_calls],
    }


def _items(data: dict[str, Any], key: str) -> list[tuple[str, Any]]:
    found = data.get(key) or {}
    return list(found.items()) if isinstance(found, dict) else []


def view_from_wire(data: dict[str, Any]) -> ConversationView:
    try:
        return ConversationView(
            conversation=Conversation.from_dict(data["conversation"]),
            version=int(data["version"]),
            settled=tuple(Entry.from_dict(e) for e in data["entries"]),
            runs=tuple(Run.from_dict(r) for r in data["runs"]),
            inbox=tuple(InboxItem.from_dict(i) for i in data["inbox"]),
            tool_calls=tuple(ToolCallRecord.from_dict(c) for c in data["tool_calls"]),
            cursors=MappingProxyType(
                {k: StreamCursor(int(e), int(s)) for k, (e, s) in data["cursors"].items()}
            ),
            reasoning=MappingProxyType(
                {k: LiveText.of(v) for k, v in (data.get("reasoning") or {}).items()}
            ),
            tool_output=MappingProxyType(dict(data.get("tool_output") or {})),
            lease_pid=data.get("lease_pid"),
            todos=tuple(TodoItem.from_dict(t) for t in data.get("todos") or ()),
            earlier=int(data.get("earlier") or 0),
            rules=tuple(Rule.from_dict(r) for r in data.get("rules") or ()),
            retrying=MappingProxyType(
                {k: Retry(int(a), float(d), str(r)) for k, (a, d, r) in _items(data, "retrying")}
            ),
            compacting=MappingProxyType(
                {
                    k: Compacting(int(e), int(t), int(w))
                    for k, (e, t, w) in _items(data, "compacting")
                }
            ),
            live=MappingProxyType({k: LiveText.of(v) for k, v in _items(data, "live")}),
            child_calls=tuple(ToolCallRecord.from_dict(c) for c in data.get("child_calls") or ()),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"a malformed view: {exc}") from None
