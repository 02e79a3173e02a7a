"""What the harness answers with, as plain values: usage totals, restore plans and their
reports, a rewind, an interruption or redirection, a search hit, an MCP server's state.
Each crosses the protocol (runtime.model.protocol) as JSON and back unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import msgspec

from runtime.model.records import Conversation, Entry, InboxItem


class Quality(StrEnum):
    MEASURED = "measured"
    ESTIMATED = "estimated"
    UNAVAILABLE = "unavailable"


_ORDER = (Quality.MEASURED, Quality.ESTIMATED, Quality.UNAVAILABLE)


def worse_quality(a: str, b: str) -> Quality:
    """The less trustworthy of two qualities: a sum is only as good as its worst part."""
    return max(Quality(a), Quality(b), key=_ORDER.index)


class UsageTotals(msgspec.Struct, frozen=True):
    """Summed counts; `cost` is None when no part had a known price, and
    `cost_complete` says whether every part had one."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    cost_complete: bool = True
    quality: Quality = Quality.MEASURED
    parts: int = 0

    def add(self, usage: Mapping[str, Any]) -> UsageTotals:
        raw = usage.get("cost")
        known = isinstance(raw, int | float) and not isinstance(raw, bool)
        cost = float(raw) if isinstance(raw, int | float) else 0.0
        return UsageTotals(
            self.input_tokens + int(usage.get("input_tokens", 0)),
            self.output_tokens + int(usage.get("output_tokens", 0)),
            self.cached_input_tokens + int(usage.get("cached_input_tokens", 0)),
            self.reasoning_tokens + int(usage.get("reasoning_tokens", 0)),
            ((self.cost or 0.0) + cost) if known else self.cost,
            self.cost_complete and known,
            worse_quality(self.quality, usage.get("quality", Quality.UNAVAILABLE)),
            self.parts + 1,
        )

    def merge(self, other: UsageTotals) -> UsageTotals:
        """These totals and `other`'s together (a child conversation's, say)."""
        if not other.parts:
            return self
        if not self.parts:
            return other
        known = [c for c in (self.cost, other.cost) if c is not None]
        return UsageTotals(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            sum(known) if known else None,
            self.cost_complete and other.cost_complete,
            worse_quality(self.quality, other.quality),
            self.parts + other.parts,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost": self.cost,
            "cost_complete": self.cost_complete,
            "quality": str(self.quality),
        }


class UsageSummary(msgspec.Struct, frozen=True):
    total: UsageTotals = msgspec.field(default_factory=UsageTotals)
    per_run: Mapping[str, UsageTotals] = msgspec.field(default_factory=dict)
    per_model: Mapping[str, UsageTotals] = msgspec.field(default_factory=dict)
    compaction: UsageTotals = msgspec.field(default_factory=UsageTotals)
    #: The newest request's input + output tokens and their quality (None: no request yet).
    context_tokens: int | None = None
    context_quality: Quality = Quality.UNAVAILABLE
    #: Each subagent's conversation (runtime.agents), by its id: in `total` and
    #: `per_model` too, so a session's totals are what its whole work cost.
    children: Mapping[str, UsageTotals] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.to_dict(),
            "children": {k: v.to_dict() for k, v in self.children.items()},
            "per_run": {k: v.to_dict() for k, v in self.per_run.items()},
            "per_model": {k: v.to_dict() for k, v in self.per_model.items()},
            "compaction": self.compaction.to_dict(),
            "context_tokens": self.context_tokens,
            "context_quality": str(self.context_quality),
        }


class ServerState(StrEnum):
    STARTING = "starting"  # connecting, or listing its tools
    READY = "ready"  # its tools are offered to the model
    FAILED = "failed"  # did not start, timed out, or died: its tools are gone
    STOPPED = "stopped"  # closed with the session


class McpServerStatus(msgspec.Struct, frozen=True):
    name: str
    transport: str  # "stdio" or "http"
    target: str  # the command line or the URL (never env or headers)
    state: ServerState
    detail: str = ""  # one line: why it failed, or what it skipped
    tools: tuple[str, ...] = ()  # namespaced: NAME__tool

    def line(self) -> str:
        """`NAME (stdio: cmd args) ready, 3 tools` / `… failed: why`."""
        head = f"{self.name} ({self.transport}: {self.target}) {self.state.value}"
        if self.state is ServerState.READY:
            head += f", {len(self.tools)} tool{'s' if len(self.tools) != 1 else ''}"
        return head + (f": {self.detail}" if self.detail else "")


class McpPrompt(msgspec.Struct, frozen=True):
    """A prompt an MCP server offers: the app's `/mcp__SERVER__NAME` command."""

    server: str
    name: str
    description: str = ""
    arguments: tuple[str, ...] = ()  # in the server's order
    required: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return f"mcp__{self.server}__{self.name}"


class McpResource(msgspec.Struct, frozen=True):
    """A resource an MCP server lists: attached to a prompt by `@SERVER:URI`."""

    server: str
    uri: str
    name: str = ""
    description: str = ""
    mime_type: str = ""

    @property
    def mention(self) -> str:
        return f"{self.server}:{self.uri}"


class SearchHit(msgspec.Struct, frozen=True):
    """A conversation that matched, with its best-ranked entry and a snippet of it.

    `spans` is the snippet as (text, matched) pieces; `marked()` joins them with the
    marks a front end wants. `score` is bm25 (lower is better)."""

    conversation: Conversation
    entry_id: str
    entry_kind: str
    score: float
    spans: tuple[tuple[str, bool], ...]

    def marked(self, before: str = "[", after: str = "]") -> str:
        return "".join(f"{before}{t}{after}" if hit else t for t, hit in self.spans)


class Rewound(msgspec.Struct, frozen=True):
    """A rewind: the new conversation (history up to just before the user message),
    and that message's text, for the front end to put back in the prompt."""

    conversation: Conversation
    prompt: str
    source_id: str
    entry_id: str


class AgentRecord(msgspec.Struct, frozen=True):
    """A background subagent of a session (runtime.agents.background): its id, kind and
    description, its newest run's state, its last words (the end of its newest answer)
    and its spend."""

    id: str
    agent: str
    description: str
    state: str
    last_words: str
    input_tokens: int
    output_tokens: int
    cost: float | None

    @property
    def running(self) -> bool:
        return self.state in ("queued", "running", "awaiting_approval")


class Parked(msgspec.Struct, frozen=True):
    """What `Harness.park` did: the lease handed to the front end's process as a parked
    lease (`owner`, `pid`, fencing `token`), and the attach socket's token, for the
    front end to keep serving that socket's path while no harness runs (None: none);
    and the model and approval mode it ran with (a flag's or a mode chosen hold for
    that process alone: the one started again runs with them too). A conversation not
    stored yet has no lease: `owner` is empty."""

    owner: str
    pid: int
    token: int
    attach_token: str | None = None
    approval_mode: str = ""
    model: str = ""


class Interruption(msgspec.Struct, frozen=True):
    """What `Harness.interrupt` did: the run it asked to stop (None if none was active)
    and the queued inputs it withdrew, oldest first, for the prompt to take back."""

    run_id: str | None
    withdrawn: tuple[InboxItem, ...] = ()

    def __bool__(self) -> bool:
        return self.run_id is not None


class Redirection(msgspec.Struct, frozen=True):
    """What `Harness.redirect` did: the run it cut (None if none was active), the queued
    inputs it withdrew for the prompt to take back, and the new prompt's inbox item."""

    run_id: str | None
    withdrawn: tuple[InboxItem, ...]
    item: InboxItem


class Supersession(msgspec.Struct, frozen=True):
    """What `Harness.supersede` did: the run it ended (its unfinished work discarded
    from the model's context, kept in the record), the note entry that says so, the
    queued inputs it withdrew for the prompt to take back, and the new prompt's item
    when one was given."""

    run_id: str
    note: Entry
    withdrawn: tuple[InboxItem, ...] = ()
    item: InboxItem | None = None


class FileRestore(msgspec.Struct, frozen=True):
    """One path put back: `content` written, or the file removed when it is None.

    `seen` is the path as the plan found it (`state_of`: a sha256, "absent" or "not
    a file"): `restore` leaves a path alone that has changed since (the user edited
    or made it after /rewind), and says so. None: not checked.
    """

    path: str
    content: bytes | None
    because: str  # which call's record it comes from, for people
    seen: str | None = None

    @property
    def action(self) -> str:
        return "remove" if self.content is None else "restore"


class RestorePlan(msgspec.Struct, frozen=True):
    """What restoring the workspace to before `entry_id` would do, and what it cannot."""

    conversation_id: str
    entry_id: str
    cwd: str
    files: tuple[FileRestore, ...] = ()
    cannot_undo: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [f"{f.action} {f.path} ({f.because})" for f in self.files]
        return out + [f"cannot undo: {why}" for why in self.cannot_undo]


class RestoreReport(msgspec.Struct, frozen=True):
    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    cannot_undo: tuple[str, ...] = msgspec.field(default_factory=tuple)
    left_alone: tuple[tuple[str, str], ...] = ()  # (path, why): changed since the plan


class CloseReport(msgspec.Struct, frozen=True):
    """How a harness closed (seed 000's two-phase close): the conversations whose driver
    settled within the bound (what was streamed committed, runs left resumable, lease
    released), and those that did not (`remaining`: abandoned, their lease expires by
    itself and their runs resume when opened again)."""

    settled: tuple[str, ...] = ()
    remaining: tuple[str, ...] = ()
    grace: float = 0.0

    @property
    def timed_out(self) -> bool:
        return bool(self.remaining)

    def line(self) -> str | None:
        """One line for a front end when something did not settle; None when all did."""
        if not self.remaining:
            return None
        n = len(self.remaining)
        which = ", ".join(r[-8:] for r in self.remaining)
        return (
            f"{n} session{'s' if n > 1 else ''} ({which}) did not settle within "
            f"{self.grace:g} s of closing: their runs resume when opened again "
            "(bastion -r ID), after their lease expires"
        )


class DriverAt(msgspec.Struct, frozen=True):
    """Where a conversation that this process follows through the store is driven
    (`Harness.follow`): the driving process's pid and host name, as its lease says."""

    pid: int | None
    host: str | None

    def where(self) -> str:
        """`pid 123 on build-1`, for one line."""
        return f"pid {self.pid if self.pid is not None else '?'} on {self.host or 'another host'}"
