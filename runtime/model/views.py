"""Views and the one reducer: `reduce(view, event) -> view`, pure, over frozen data.

A view starts from a store snapshot and takes events in order. Durable events
must arrive with consecutive versions; transient deltas with consecutive seqs
per run (and the text offset they expect). Anything else cannot be trusted to
produce the right screen, so the view comes back with `resync_required` set
and the front end reloads a snapshot. Old or duplicated events are ignored.

Cost per event does not grow with the transcript. The text of an entry that is
growing lives in `view.live` as a `LiveText`: an append-only run of chunks that
successive views share (a view owns a prefix of it, as a Go slice does), so a
delta costs what its own text costs, not the whole answer. `view.entries` folds
the live texts back in on demand (once per view); a front end that renders per
frame reads `view.settled` and `view.live` instead and never joins the whole text.
Consecutive deltas of one run may arrive joined as one `TextDeltas` (what a
coalescing event channel makes of them): the same checks, once per batch. The
reasoning streaming with an answer is a `LiveText` too (`view.reasoning`), and its
deltas are joined the same way (`ReasoningDeltas`).
"""

from __future__ import annotations

import json
import shlex
from bisect import bisect_right
from types import MappingProxyType
from typing import Any, ClassVar, Final

import msgspec
from msgspec.structs import replace

from runtime.model.events import (
    AttemptReset,
    CompactionProgress,
    ConversationCreated,
    ConversationUpdated,
    EntryAdded,
    EntryClosed,
    EntryReasoningAppended,
    EntryTextAppended,
    EntryUpdated,
    Event,
    InboxUpdated,
    LeaseChanged,
    ReasoningDelta,
    RulesUpdated,
    RunUpdated,
    SessionFailed,
    SettingsChanged,
    TextDelta,
    TodosUpdated,
    ToolCallUpdated,
    ToolOutputAppended,
    ToolOutputDelta,
)
from runtime.model.records import Conversation, Entry, InboxItem, Run, ToolCallRecord
from runtime.model.rules import Rule
from runtime.model.todo import TodoItem


class Retry(msgspec.Struct, frozen=True):
    """A model request about to be sent again: which attempt, after how long, and why."""

    attempt: int
    delay: float
    reason: str


class Compacting(msgspec.Struct, frozen=True):
    """A compaction under way in a run: how many entries (about how many tokens) are
    being summarised, and how much of the summary is written; `background`: while the
    run goes on (it does not wait for it)."""

    entries: int
    tokens: int
    written: int = 0
    background: bool = False


class StreamCursor(msgspec.Struct, frozen=True):
    epoch: int
    seq: int


_EMPTY: MappingProxyType[str, Any] = MappingProxyType({})
TOOL_OUTPUT_TAIL = 16_384  # characters of a running command's output a view keeps


class _Chunks:
    """The shared, append-only store behind `LiveText` values (never shrinks)."""

    __slots__ = ("ends", "parts")

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.ends: list[int] = []
        total = 0
        for part in parts:
            total += len(part)
            self.ends.append(total)


class LiveText(msgspec.Struct, frozen=True, eq=False):
    """An immutable text that grows in amortized O(len(suffix)).

    Values share one `_Chunks`; each holds the first `count` parts of it. Appending
    to the newest value extends the shared chunks in place, which no older value
    can see (they stop at their own count); appending to an older value copies.
    """

    _chunks: _Chunks
    count: int
    length: int

    @classmethod
    def of(cls, text: str) -> LiveText:
        return cls(_Chunks([text] if text else []), 1 if text else 0, len(text))

    def __len__(self) -> int:
        return self.length

    def __str__(self) -> str:
        parts = self._chunks.parts
        return parts[0] if self.count == 1 else "".join(parts[: self.count])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):  # a LiveText is the text it holds
            return str(self) == other
        return isinstance(other, LiveText) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def append(self, text: str) -> LiveText:
        if not text:
            return self
        chunks = self._chunks
        if self.count != len(chunks.parts):  # an older value: branch off a copy
            chunks = _Chunks(chunks.parts[: self.count])
        chunks.parts.append(text)
        chunks.ends.append(self.length + len(text))
        return LiveText(chunks, len(chunks.parts), self.length + len(text))

    def extends(self, other: LiveText) -> bool:
        """`str(self).startswith(str(other))`; O(1) when `self` grew from `other`."""
        if self.length < other.length:
            return False
        if self._chunks is other._chunks and self.count >= other.count:
            return True
        return self.slice(0, other.length) == str(other)

    def slice(self, start: int, stop: int | None = None) -> str:
        """`str(self)[start:stop]`, joining only the chunks in that range."""
        stop = self.length if stop is None else min(stop, self.length)
        if start >= stop:
            return ""
        parts, ends = self._chunks.parts, self._chunks.ends
        first = bisect_right(ends, start, 0, self.count)
        out: list[str] = []
        begin = ends[first - 1] if first else 0
        i = first
        while i < self.count and begin < stop:
            part = parts[i]
            out.append(part[max(0, start - begin) : stop - begin])
            begin += len(part)
            i += 1
        return "".join(out)


_NO_TEXT: Final = LiveText.of("")


class TextDeltas(msgspec.Struct, frozen=True):
    """Consecutive `TextDelta`s of one run and entry, joined (seq `seq`..`last_seq`).

    Not a harness event: what a coalescing channel hands a front end in place of
    the deltas it joined. The reducer checks it exactly as it would the first of
    them, and moves the run's cursor to the last.
    """

    type: ClassVar[str] = "text.deltas"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    last_seq: int
    entry_id: str
    offset: int
    text: str


class ReasoningDeltas(msgspec.Struct, frozen=True):
    """Consecutive `ReasoningDelta`s of one run and entry, joined (seq `seq`..`last_seq`),
    as `TextDeltas` joins text deltas."""

    type: ClassVar[str] = "reasoning.deltas"
    conversation_id: str
    run_id: str
    epoch: int
    seq: int
    last_seq: int
    entry_id: str
    text: str


ViewEvent = Event | TextDeltas | ReasoningDeltas  # what `reduce` takes

# A front end opens a session with a view of its last entries (`snapshot(last=...)`):
# enough for its last screens, and quick to read, send and draw at any length. It
# takes the whole view (a resync) once that is on screen.
OPENING_ENTRIES: Final = 200


class ConversationView(msgspec.Struct, frozen=True, dict=True):
    # (`dict=True`: an instance `__dict__` for the folded entries, a cache that is no
    # field, so equality, repr and `replace` leave it out: a replaced
    # view folds its own.)
    conversation: Conversation
    version: int
    # The entries as added or last updated; a growing entry's text is in `live`.
    settled: tuple[Entry, ...] = ()
    runs: tuple[Run, ...] = ()
    inbox: tuple[InboxItem, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    rules: tuple[Rule, ...] = ()  # the session's approval rules (project rules: Harness.rules)
    todos: tuple[TodoItem, ...] = ()  # the model's checklist, as its last `todo` call left it
    # Transient state: not in the store, rebuilt from deltas.
    cursors: MappingProxyType[str, StreamCursor] = msgspec.field(default_factory=lambda: _EMPTY)
    reasoning: MappingProxyType[str, LiveText] = msgspec.field(default_factory=lambda: _EMPTY)
    tool_output: MappingProxyType[str, str] = msgspec.field(default_factory=lambda: _EMPTY)
    # run id -> the retry it waits for (the model request is sent again after a delay);
    # gone with the run's next streamed event or its end.
    retrying: MappingProxyType[str, Retry] = msgspec.field(default_factory=lambda: _EMPTY)
    # run id -> the compaction it is doing (gone when it ends, or with the run).
    compacting: MappingProxyType[str, Compacting] = msgspec.field(default_factory=lambda: _EMPTY)
    lease_pid: int | None = None
    resync_required: bool = False
    # Entries before `settled` left out: a view of the session's end (`snapshot(last=N)`),
    # quick to take and send, for opening a long session. An update to one of those
    # resyncs it; a snapshot without `last` has them all (0).
    earlier: int = 0
    live: MappingProxyType[str, LiveText] = msgspec.field(default_factory=lambda: _EMPTY)
    # Calls of this conversation's subagents waiting for the user's approval
    # (runtime.agents): asked in the parent's approval prompt, the child named.
    child_calls: tuple[ToolCallRecord, ...] = ()

    @property
    def entries(self) -> tuple[Entry, ...]:
        """The transcript with every live text folded in (computed once per view)."""
        if not self.live:
            return self.settled
        folded: tuple[Entry, ...] | None = self.__dict__.get("_folded")
        if folded is None:
            folded = tuple(
                e.but(text=str(self.live[e.id])) if e.id in self.live else e for e in self.settled
            )
            self.__dict__["_folded"] = folded
        return folded

    def text_of(self, entry: Entry) -> LiveText:
        """`entry`'s current text as a `LiveText` (cheap to slice; no join)."""
        live = self.live.get(entry.id)
        return live if live is not None else LiveText.of(entry.text)

    @property
    def active_run(self) -> Run | None:
        for run in reversed(self.runs):
            if not run.terminal:
                return run
        return None

    @property
    def queued_inbox(self) -> tuple[InboxItem, ...]:
        return tuple(i for i in self.inbox if i.state == "queued")

    @property
    def held_inbox(self) -> tuple[InboxItem, ...]:
        """Inputs held behind a failed run, waiting for the user (Harness.send_held)."""
        return tuple(i for i in self.inbox if i.state == "held")

    def entry(self, entry_id: str) -> Entry | None:
        entry = self._settled_entry(entry_id)
        live = self.live.get(entry_id)
        if entry is not None and live is not None:
            return entry.but(text=str(live))
        return entry

    def _settled_entry(self, entry_id: str) -> Entry | None:
        for entry in reversed(self.settled):
            if entry.id == entry_id:
                return entry
        return None

    def run(self, run_id: str) -> Run | None:
        for run in reversed(self.runs):
            if run.id == run_id:
                return run
        return None


def _replace_by_id(items: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
    """`items` with the element of the same id replaced, or `item` appended."""
    for i in range(len(items) - 1, -1, -1):
        if items[i].id == item.id:
            return (*items[:i], item, *items[i + 1 :])
    return (*items, item)


def _with(mapping: MappingProxyType[str, Any], key: str, value: Any) -> MappingProxyType[str, Any]:
    return MappingProxyType({**mapping, key: value})


def _without(mapping: MappingProxyType[str, Any], key: str) -> MappingProxyType[str, Any]:
    if key not in mapping:
        return mapping
    return MappingProxyType({k: v for k, v in mapping.items() if k != key})


def _set_entry(view: ConversationView, entry: Entry) -> ConversationView:
    """`entry` as it now is, whole text included: it replaces any live text of it."""
    return replace(
        view, settled=_replace_by_id(view.settled, entry), live=_without(view.live, entry.id)
    )


def _resync(view: ConversationView) -> ConversationView:
    return replace(view, resync_required=True)


def reduce(view: ConversationView, event: ViewEvent) -> ConversationView:
    """Apply one event. Pure: returns a new view (or the same one if nothing changed)."""
    if view.resync_required:
        return view
    if event.conversation_id != view.conversation.id:
        if isinstance(event, ToolCallUpdated) and child_task(view, event.conversation_id):
            return _child_call(view, event.tool_call)
        return view
    if hasattr(event, "version"):
        return _reduce_durable(view, event)
    if isinstance(event, SettingsChanged | SessionFailed):
        return view  # (the front end's, not the view's: tui.app.BastionApp.use_settings)
    return _reduce_transient(view, event)


def _reduce_durable(view: ConversationView, event: Any) -> ConversationView:
    if event.version <= view.version:
        return view  # already in the snapshot, or a duplicate
    if event.version != view.version + 1:
        return _resync(view)
    view = replace(view, version=event.version)
    match event:
        case ConversationCreated(conversation=conv) | ConversationUpdated(conversation=conv):
            return replace(view, conversation=conv)
        case EntryUpdated(entry=entry) if view.earlier and view._settled_entry(entry.id) is None:
            return _resync(view)  # one of the entries this view left out
        case EntryAdded(entry=entry) | EntryUpdated(entry=entry):
            return _set_entry(view, entry)
        case EntryTextAppended(entry_id=entry_id, offset=offset, text=text):
            return _append_text(view, entry_id, offset, text)
        case EntryClosed(entry_id=entry_id, status=status, data=data, length=length):
            view = close_entry(view, entry_id, status, data, length)
            return replace(view, reasoning=_without(view.reasoning, entry_id))
        case EntryReasoningAppended(entry_id=entry_id, offset=offset, text=text):
            return _append_reasoning(view, entry_id, offset, text)
        case ToolOutputAppended():
            return view  # the live tail comes from deltas; the result carries the output
        case RunUpdated(run=run):
            return _run_updated(view, run)
        case RulesUpdated(rules=rules):
            return replace(view, rules=tuple(Rule.from_dict(r) for r in rules))
        case TodosUpdated(todos=todos):
            return replace(view, todos=tuple(TodoItem.from_dict(t) for t in todos))
        case ToolCallUpdated(tool_call=call):
            return replace(view, tool_calls=_replace_by_id(view.tool_calls, call))
        case InboxUpdated(item=item):
            return replace(view, inbox=_replace_by_id(view.inbox, item))
        case LeaseChanged(pid=pid):
            return replace(view, lease_pid=pid)
    return view


def child_task(view: ConversationView, conversation_id: str) -> ToolCallRecord | None:
    """The `task` call of this conversation that started subagent `conversation_id`."""
    for call in view.tool_calls:
        if call.process is not None and call.process.get("child") == conversation_id:
            return call
    return None


def child_label(view: ConversationView, call: ToolCallRecord) -> str:
    """How an approval prompt names the subagent asking ("" for the view's own call)."""
    if call.conversation_id == view.conversation.id:
        return ""
    task = child_task(view, call.conversation_id)
    process = task.process if task is not None and task.process else {}
    agent, what = str(process.get("agent", "subagent")), str(process.get("description", ""))
    return f"{agent} ({what})" if what and what != agent else agent


def _child_call(view: ConversationView, call: ToolCallRecord) -> ConversationView:
    """A subagent's call changed: kept while it waits for approval, dropped after."""
    others = tuple(c for c in view.child_calls if c.id != call.id)
    if call.approval == "pending" and call.state == "pending":
        others = (*others, call)
    return replace(view, child_calls=others)


def _run_updated(view: ConversationView, run: Run) -> ConversationView:
    view = replace(view, runs=_replace_by_id(view.runs, run))
    if run.terminal and run.id in view.cursors:
        cursors = {k: v for k, v in view.cursors.items() if k != run.id}
        view = replace(view, cursors=MappingProxyType(cursors))
    if run.terminal and run.id in view.retrying:
        view = replace(view, retrying=_without(view.retrying, run.id))
    if run.terminal and run.id in view.compacting:
        view = replace(view, compacting=_without(view.compacting, run.id))
    return view


def _append_text(view: ConversationView, entry_id: str, offset: int, text: str) -> ConversationView:
    """Text known to start at `offset`: append what is new, or resync on a hole."""
    current = view.live.get(entry_id)
    if current is None:
        entry = view._settled_entry(entry_id)
        if entry is None:
            return _resync(view)
        current = LiveText.of(entry.text)
    known = len(current)
    if offset > known:
        return _resync(view)
    end = offset + len(text)
    if end <= known:
        return view  # a checkpoint of text the deltas already showed
    if current.slice(offset) != text[: known - offset]:
        return _resync(view)
    return replace(view, live=_with(view.live, entry_id, current.append(text[known - offset :])))


def _append_reasoning(
    view: ConversationView, entry_id: str, offset: int, text: str
) -> ConversationView:
    """Checkpointed reasoning at `offset`: what the deltas did not show yet is added."""
    known = view.reasoning.get(entry_id, _NO_TEXT)
    if offset > len(known):
        return _resync(view)
    if offset + len(text) <= len(known):
        return view
    grown = known.append(text[len(known) - offset :])
    return replace(view, reasoning=_with(view.reasoning, entry_id, grown))


def close_entry(
    view: ConversationView, entry_id: str, status: str, data: dict[str, Any], length: int
) -> ConversationView:
    """An entry that finished streaming, told without its text: `length` characters of it.

    For an event that completes a streamed entry without repeating its text (the
    text is what the deltas and checkpoints built). If the view holds less than
    `length` characters it cannot know the rest: resync.
    """
    entry = view._settled_entry(entry_id)
    if entry is None:
        return _resync(view)
    text = view.text_of(entry)
    if len(text) < length:
        return _resync(view)
    closed = entry.but(status=status, data=data, text=text.slice(0, length))
    return _set_entry(view, closed)


def _reduce_transient(view: ConversationView, event: Any) -> ConversationView:
    cursor = view.cursors.get(event.run_id)
    if cursor is not None and cursor.epoch == event.epoch:
        if event.seq <= cursor.seq:
            return view  # duplicate
        if event.seq != cursor.seq + 1:
            return _resync(view)
    elif event.seq != 1:
        return _resync(view)  # joined a stream midway without its cursor
    last = event.last_seq if isinstance(event, TextDeltas | ReasoningDeltas) else event.seq
    view = replace(view, cursors=_with(view.cursors, event.run_id, StreamCursor(event.epoch, last)))
    if event.run_id in view.retrying:
        view = replace(view, retrying=_without(view.retrying, event.run_id))
    match event:
        case (
            TextDelta(entry_id=entry_id, offset=offset, text=text)
            | TextDeltas(entry_id=entry_id, offset=offset, text=text)
        ):
            return _append_text(view, entry_id, offset, text)
        case (
            ReasoningDelta(entry_id=entry_id, text=text)
            | ReasoningDeltas(entry_id=entry_id, text=text)
        ):
            grown = view.reasoning.get(entry_id, _NO_TEXT).append(text)  # O(len(text))
            return replace(view, reasoning=_with(view.reasoning, entry_id, grown))
        case CompactionProgress(run_id=run_id, phase="started" | "writing"):
            state = Compacting(event.entries, event.tokens, event.written, event.background)
            return replace(view, compacting=_with(view.compacting, run_id, state))
        case CompactionProgress(run_id=run_id):
            return replace(view, compacting=_without(view.compacting, run_id))
        case ToolOutputDelta(tool_call_id=call_id, text=text):
            # A live preview: only the newest TOOL_OUTPUT_TAIL characters are kept; the
            # whole (bounded) output arrives with the tool's result.
            tail = (view.tool_output.get(call_id, "") + text)[-TOOL_OUTPUT_TAIL:]
            return replace(view, tool_output=_with(view.tool_output, call_id, tail))
        case AttemptReset(entry_id=entry_id, run_id=run_id):
            retry = Retry(event.attempt, event.delay, event.reason)
            view = replace(view, retrying=_with(view.retrying, run_id, retry))
            entry = view._settled_entry(entry_id)
            if entry is None:
                return view
            view = _set_entry(view, entry.but(text=""))
            return replace(view, reasoning=_without(view.reasoning, entry_id))
    return view


def view_from_snapshot(
    snapshot: Any, cursors: dict[str, StreamCursor] | None = None
) -> ConversationView:
    """A view of a store `Snapshot`, optionally with live cursors of runs this process streams."""
    return ConversationView(
        conversation=snapshot.conversation,
        version=snapshot.conversation.version,
        settled=snapshot.entries,
        runs=snapshot.runs,
        inbox=snapshot.inbox,
        tool_calls=snapshot.tool_calls,
        rules=snapshot.rules,
        todos=snapshot.todos,
        earlier=snapshot.earlier,
        cursors=MappingProxyType(dict(cursors or {})),
        # The reasoning of an answer still streaming, so its next checkpoint or delta
        # goes on from it (a finished entry keeps its reasoning in its data).
        reasoning=MappingProxyType(
            {
                e.id: LiveText.of(e.data["reasoning"])
                for e in snapshot.entries
                if e.status == "streaming" and e.data.get("reasoning")
            }
        ),
    )


KEEPS_RUNNING = "(keeps running in the background until stopped or the session ends)"


def background_note(name: str, arguments: str) -> str:
    """What an approval adds for a command that will keep running (KEEPS_RUNNING), else ""."""
    if name != "run_command" or '"background"' not in arguments:
        return ""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return ""
    return KEEPS_RUNNING if isinstance(args, dict) and args.get("background") is True else ""


def call_summary(name: str, arguments: str, limit: int = 160) -> str:
    """A tool call in a few words, as a person would say what it does: the command,
    the path (and lines), the pattern and where; other calls' arguments as JSON."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return arguments_preview(arguments, limit)
    text = _summary(name, args)
    if text is None:
        return arguments_preview(arguments, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(name: str, args: dict[str, Any]) -> str | None:
    def word(key: str) -> str | None:
        value = args.get(key)
        return value if isinstance(value, str) and value else None

    if name == "run_command":
        argv = args.get("argv")
        if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
        return word("command")
    if name in ("read_file", "read_output"):
        what = word("path") if name == "read_file" else word("id")
        offset, limit = args.get("offset"), args.get("limit")
        if what is not None and isinstance(offset, int) and isinstance(limit, int):
            return f"{what} (lines {offset + 1}-{offset + limit})"
        if what is not None and isinstance(offset, int):
            return f"{what} (from line {offset + 1})"
        return what
    if name in ("write_file", "edit_file", "list_directory"):
        return word("path") or ("." if name == "list_directory" else None)
    if name == "todo":  # runtime.plan: how far along, and the step under way
        items = [t for t in args.get("todos") or () if isinstance(t, dict)]
        done = sum(t.get("status") == "done" for t in items)
        doing = next((t.get("content") for t in items if t.get("status") == "in_progress"), None)
        head = f"{done}/{len(items)} done"
        return f"{head} · {doing}" if isinstance(doing, str) and doing else head
    if name in ("glob", "search_files"):
        pattern, where = word("pattern"), word("path")
        if pattern is None:
            return None
        shown = pattern if name == "glob" else f'"{pattern}"'
        return f"{shown} in {where}" if where else shown
    if name == "task":  # a subagent (runtime.agents): its agent and what it does
        what = word("description") or word("prompt")
        return f"{word('agent') or 'general'}: {what}" if what else None
    return None


def arguments_preview(arguments: str, limit: int = 200) -> str:
    """A one-line rendering of a tool call's JSON arguments, for people."""
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        text = arguments
    return text if len(text) <= limit else text[: limit - 1] + "…"
