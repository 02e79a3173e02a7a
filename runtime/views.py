"""Views and the one reducer: `reduce(view, event) -> view`, pure, over frozen data.

A view starts from a store snapshot and takes events in order. Durable events
must arrive with consecutive versions; transient deltas with consecutive seqs
per run (and the text offset they expect). Anything else cannot be trusted to
produce the right screen, so the view comes back with `resync_required` set
and the front end reloads a snapshot. Old or duplicated events are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from runtime.events import (
    AttemptReset,
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
    RunUpdated,
    TextDelta,
    ToolCallUpdated,
    ToolOutputAppended,
    ToolOutputDelta,
)
from runtime.records import Conversation, Entry, InboxItem, Run, ToolCallRecord


@dataclass(frozen=True, slots=True)
class StreamCursor:
    epoch: int
    seq: int


_EMPTY: MappingProxyType[str, Any] = MappingProxyType({})
TOOL_OUTPUT_TAIL = 16_384  # characters of a running command's output a view keeps


@dataclass(frozen=True, slots=True)
class ConversationView:
    conversation: Conversation
    version: int
    entries: tuple[Entry, ...] = ()
    runs: tuple[Run, ...] = ()
    inbox: tuple[InboxItem, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    # Transient state: not in the store, rebuilt from deltas.
    cursors: MappingProxyType[str, StreamCursor] = field(default_factory=lambda: _EMPTY)
    reasoning: MappingProxyType[str, str] = field(default_factory=lambda: _EMPTY)
    tool_output: MappingProxyType[str, str] = field(default_factory=lambda: _EMPTY)
    lease_pid: int | None = None
    resync_required: bool = False

    @property
    def active_run(self) -> Run | None:
        for run in reversed(self.runs):
            if not run.terminal:
                return run
        return None

    @property
    def queued_inbox(self) -> tuple[InboxItem, ...]:
        return tuple(i for i in self.inbox if i.state == "queued")

    def entry(self, entry_id: str) -> Entry | None:
        for entry in reversed(self.entries):
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


def _resync(view: ConversationView) -> ConversationView:
    return replace(view, resync_required=True)


def reduce(view: ConversationView, event: Event) -> ConversationView:
    """Apply one event. Pure: returns a new view (or the same one if nothing changed)."""
    if view.resync_required or event.conversation_id != view.conversation.id:
        return view
    if hasattr(event, "version"):
        return _reduce_durable(view, event)
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
        case EntryAdded(entry=entry):
            return replace(view, entries=_replace_by_id(view.entries, entry))
        case EntryTextAppended(entry_id=entry_id, offset=offset, text=text):
            return _append_text(view, entry_id, offset, text)
        case EntryUpdated(entry=entry):
            return replace(view, entries=_replace_by_id(view.entries, entry))
        case EntryClosed(entry_id=entry_id, status=status, data=data, length=length):
            return _close_entry(view, entry_id, status, data, length)
        case EntryReasoningAppended(entry_id=entry_id, offset=offset, text=text):
            known = view.reasoning.get(entry_id, "")
            if offset > len(known):
                return _resync(view)
            merged = (
                known + text[len(known) - offset :] if offset + len(text) > len(known) else known
            )
            return replace(view, reasoning=_with(view.reasoning, entry_id, merged))
        case ToolOutputAppended():
            return view  # the live tail comes from deltas; the result carries the output
        case RunUpdated(run=run):
            return _run_updated(view, run)
        case ToolCallUpdated(tool_call=call):
            return replace(view, tool_calls=_replace_by_id(view.tool_calls, call))
        case InboxUpdated(item=item):
            return replace(view, inbox=_replace_by_id(view.inbox, item))
        case LeaseChanged(pid=pid):
            return replace(view, lease_pid=pid)
    return view


def _run_updated(view: ConversationView, run: Run) -> ConversationView:
    view = replace(view, runs=_replace_by_id(view.runs, run))
    if run.terminal and run.id in view.cursors:
        cursors = {k: v for k, v in view.cursors.items() if k != run.id}
        view = replace(view, cursors=MappingProxyType(cursors))
    return view


def _close_entry(
    view: ConversationView, entry_id: str, status: str, data: dict[str, Any], length: int
) -> ConversationView:
    """A streamed entry ended: its text is the `length` characters streamed so far."""
    entry = view.entry(entry_id)
    if entry is None or len(entry.text) < length:
        return _resync(view)
    closed = entry.but(status=status, data=data, text=entry.text[:length])
    reasoning = {k: v for k, v in view.reasoning.items() if k != entry_id}
    return replace(
        view,
        entries=_replace_by_id(view.entries, closed),
        reasoning=MappingProxyType(reasoning)
        if len(reasoning) != len(view.reasoning)
        else view.reasoning,
    )


def _append_text(view: ConversationView, entry_id: str, offset: int, text: str) -> ConversationView:
    """Text known to start at `offset`: append what is new, or resync on a hole."""
    entry = view.entry(entry_id)
    if entry is None:
        return _resync(view)
    known = len(entry.text)
    if offset > known:
        return _resync(view)
    end = offset + len(text)
    if end <= known:
        return view  # a checkpoint of text the deltas already showed
    if entry.text[offset:] != text[: known - offset]:
        return _resync(view)
    new = entry.but(text=entry.text + text[known - offset :])
    return replace(view, entries=_replace_by_id(view.entries, new))


def _reduce_transient(view: ConversationView, event: Any) -> ConversationView:
    cursor = view.cursors.get(event.run_id)
    if cursor is not None and cursor.epoch == event.epoch:
        if event.seq <= cursor.seq:
            return view  # duplicate
        if event.seq != cursor.seq + 1:
            return _resync(view)
    elif event.seq != 1:
        return _resync(view)  # joined a stream midway without its cursor
    view = replace(
        view, cursors=_with(view.cursors, event.run_id, StreamCursor(event.epoch, event.seq))
    )
    match event:
        case TextDelta(entry_id=entry_id, offset=offset, text=text):
            return _append_text(view, entry_id, offset, text)
        case ReasoningDelta(entry_id=entry_id, text=text):
            return replace(
                view,
                reasoning=_with(view.reasoning, entry_id, view.reasoning.get(entry_id, "") + text),
            )
        case ToolOutputDelta(tool_call_id=call_id, text=text):
            # A live preview: only the newest TOOL_OUTPUT_TAIL characters are kept; the
            # whole (bounded) output arrives with the tool's result.
            tail = (view.tool_output.get(call_id, "") + text)[-TOOL_OUTPUT_TAIL:]
            return replace(view, tool_output=_with(view.tool_output, call_id, tail))
        case AttemptReset(entry_id=entry_id):
            entry = view.entry(entry_id)
            if entry is None:
                return view
            reasoning = {k: v for k, v in view.reasoning.items() if k != entry_id}
            return replace(
                view,
                entries=_replace_by_id(view.entries, entry.but(text="")),
                reasoning=MappingProxyType(reasoning),
            )
    return view


def view_from_snapshot(
    snapshot: Any, cursors: dict[str, StreamCursor] | None = None
) -> ConversationView:
    """A view of a store `Snapshot`, optionally with live cursors of runs this process streams."""
    return ConversationView(
        conversation=snapshot.conversation,
        version=snapshot.conversation.version,
        entries=snapshot.entries,
        runs=snapshot.runs,
        inbox=snapshot.inbox,
        tool_calls=snapshot.tool_calls,
        cursors=MappingProxyType(dict(cursors or {})),
    )
