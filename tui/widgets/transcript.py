"""The transcript: one widget per entry of the view, kept current from the view alone.

`Transcript.show(view)` is called after every batch of events. Entries are
immutable values, so an entry widget compares what it last drew by identity
and does nothing when nothing changed. Assistant text streams through
`MarkdownStream`: only the text past what was already written is appended; a
text that no longer extends what was shown (a retried attempt, a resync) is
redrawn once.

Tool results are not separate rows: each tool call is drawn under the
assistant turn that made it, as `name args` and the first line of its result.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from runtime import ConversationView
from runtime.context import arguments_preview
from runtime.records import Approval, Entry, EntryKind, EntryStatus, ToolCallRecord, ToolCallState

__all__ = ["AssistantEntry", "NoteEntry", "ToolCallLine", "Transcript", "UserEntry"]


def first_line(text: str, limit: int = 120) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class UserEntry(Static):
    """What the user typed, set off by a bar on the left."""

    DEFAULT_CSS = """
    UserEntry {
        margin: 1 0 0 0;
        padding: 0 1;
        border-left: outer $primary;
        background: $primary 8%;
        color: $foreground;
        text-style: bold;
    }
    """

    def __init__(self, entry: Entry) -> None:
        super().__init__(escape(entry.text), markup=True)
        self.entry = entry

    async def show(self, entry: Entry, view: ConversationView) -> None:
        if entry is not self.entry:
            self.entry = entry
            self.update(escape(entry.text))


class NoteEntry(Static):
    """A note, summary or reset marker: one dim line."""

    DEFAULT_CSS = """
    NoteEntry {
        margin: 1 0 0 0;
        padding: 0 1;
        color: $text-muted;
        text-style: italic;
    }
    """

    def __init__(self, entry: Entry) -> None:
        super().__init__(self._label(entry))
        self.entry = entry

    @staticmethod
    def _label(entry: Entry) -> str:
        match entry.kind:
            case EntryKind.SUMMARY:
                return "— earlier conversation summarized —"
            case EntryKind.RESET:
                return "— context reset —"
        return escape(first_line(entry.text))

    async def show(self, entry: Entry, view: ConversationView) -> None:
        if entry is not self.entry:
            self.entry = entry
            self.update(self._label(entry))


class ToolCallLine(Static):
    """`● name args` and, once there is a result, `⎿ first line of it`."""

    DEFAULT_CSS = """
    ToolCallLine {
        padding: 0 1;
        color: $foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, call: dict[str, str]) -> None:
        super().__init__()
        self.call = call
        self.drawn: tuple[object, ...] | None = None

    def show(
        self, record: ToolCallRecord | None, result: Entry | None, output: str | None = None
    ) -> None:
        key = (record, result, output)
        if self.drawn is not None and all(a is b for a, b in zip(key, self.drawn, strict=True)):
            return
        self.drawn = key
        self.update(self.render_markup(self.call, record, result, output))

    @staticmethod
    def render_markup(
        call: dict[str, str],
        record: ToolCallRecord | None,
        result: Entry | None,
        output: str | None = None,
    ) -> str:
        glyph, note = _call_state(record, result)
        args = escape(arguments_preview(call.get("arguments", "{}"), limit=160))
        head = f"{glyph} [b]{escape(call.get('name', '?'))}[/b] [$foreground-muted]{args}[/]"
        if result is not None and result.text.strip():
            tone = "$foreground-muted" if result.data.get("ok", True) else "$error"
            note = f"[{tone}]{escape(first_line(result.text))}[/]"
        elif output and record is not None and record.state == ToolCallState.RUNNING:
            note = _output_tail(output)
        return f"{head}\n  [$foreground-muted]└[/] {note}" if note else head


LIVE_LINES = 4  # lines of a running command's output shown under its call


def _output_tail(output: str) -> str:
    """The newest lines of a running command's output, dim, for the line under its call."""
    lines = [line for line in output.splitlines() if line.strip()][-LIVE_LINES:]
    return "\n    ".join(f"[$foreground-muted]{escape(line)}[/]" for line in lines)


def _call_state(record: ToolCallRecord | None, result: Entry | None) -> tuple[str, str]:
    """The glyph for a call's state, and a note for while it has no result."""
    if record is None:
        return "[$foreground-muted]○[/]", ""
    if record.approval == Approval.PENDING and record.state == ToolCallState.PENDING:
        return "[$warning]?[/]", "[$warning]awaiting approval[/]"
    match record.state:
        case ToolCallState.RUNNING:
            return "[$accent]◌[/]", "[$foreground-muted]running…[/]"
        case ToolCallState.DENIED:
            return "[$error]✗[/]", "[$error]denied[/]"
        case ToolCallState.INTERRUPTED:
            return "[$warning]◼[/]", "[$warning]interrupted[/]"
        case ToolCallState.DONE:
            ok = result.data.get("ok", True) if result is not None else True
            return ("[$success]●[/]", "") if ok else ("[$error]●[/]", "")
    return "[$foreground-muted]○[/]", ""


class AssistantEntry(Vertical):
    """An assistant turn: streamed Markdown, its tool calls, and how it ended if not well."""

    DEFAULT_CSS = """
    AssistantEntry {
        height: auto;
        margin: 1 0 0 0;
    }
    AssistantEntry > Markdown {
        margin: 0;
        padding: 0 1;
        background: transparent;
    }
    AssistantEntry > Markdown.-empty {
        display: none;
    }
    AssistantEntry > .marker {
        padding: 0 1;
        display: none;
    }
    AssistantEntry > .marker.-shown {
        display: block;
    }
    """

    def __init__(self, entry: Entry) -> None:
        super().__init__()
        self.entry: Entry | None = None
        self._shown = ""
        self._stream: MarkdownStream | None = None
        self._calls: dict[str, ToolCallLine] = {}
        self._marker_key: tuple[str, str, bool] | None = None

    def compose(self) -> ComposeResult:
        yield Markdown(classes="-empty")
        yield Static(classes="marker")

    @property
    def text_shown(self) -> str:
        """The text written to the Markdown so far (what the screen shows)."""
        return self._shown

    async def show(self, entry: Entry, view: ConversationView) -> None:
        if entry is not self.entry:
            self.entry = entry
            await self._show_text(entry)
        await self._show_calls(entry, view)
        self._show_marker(entry, view)

    async def _show_text(self, entry: Entry) -> None:
        markdown = self.query_one(Markdown)
        text = entry.text
        markdown.set_class(not text, "-empty")
        streaming = entry.status == EntryStatus.STREAMING
        if text.startswith(self._shown):
            new = text[len(self._shown) :]
            if new and (streaming or self._stream is not None):
                if self._stream is None:
                    self._stream = Markdown.get_stream(markdown)
                await self._stream.write(new)
            elif new:
                await markdown.update(text)
        else:  # not an extension of what is on screen: redraw once
            await self._stop_stream()
            await markdown.update(text)
        self._shown = text
        if not streaming:
            await self._stop_stream()

    async def _stop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.stop()

    async def _show_calls(self, entry: Entry, view: ConversationView) -> None:
        calls = entry.data.get("tool_calls") or ()
        if not calls:
            return
        records = {c.id: c for c in view.tool_calls if c.entry_id == entry.id}
        for call in calls:
            key = call.get("key") or call["id"]  # the call's own key (older entries: its id)
            line = self._calls.get(key)
            if line is None:
                line = self._calls[key] = ToolCallLine(call)
                await self.mount(line, before=self.query_one(".marker"))
            record = records.get(key)
            result = (
                view.entry(record.result_entry_id) if record and record.result_entry_id else None
            )
            line.show(record, result, view.tool_output.get(key))

    def _show_marker(self, entry: Entry, view: ConversationView) -> None:
        """Under the text: `thinking…` before the first token, or how the turn ended badly."""
        waiting = entry.status == EntryStatus.STREAMING and not entry.text
        message = ""
        if entry.status == EntryStatus.FAILED and entry.run_id:
            run = view.run(entry.run_id)
            message = (run.error or {}).get("message", "") if run and run.error else ""
        key = (entry.status, message, waiting)
        if key == self._marker_key:
            return
        self._marker_key = key
        marker = self.query_one(".marker", Static)
        if waiting:
            marker.update("[$foreground-muted]thinking…[/]")
        elif entry.status == EntryStatus.INTERRUPTED:
            marker.update("[$warning]◼ interrupted[/]")
        elif entry.status == EntryStatus.FAILED:
            reason = f": {escape(first_line(message))}" if message else ""
            marker.update(f"[$error]✗ failed{reason}[/]")
        ended_badly = entry.status in (EntryStatus.INTERRUPTED, EntryStatus.FAILED)
        marker.set_class(waiting or ended_badly, "-shown")

    async def on_unmount(self) -> None:
        await self._stop_stream()


EntryWidget = UserEntry | AssistantEntry | NoteEntry


def entry_widget(entry: Entry) -> EntryWidget | None:
    match entry.kind:
        case EntryKind.USER:
            return UserEntry(entry)
        case EntryKind.ASSISTANT:
            return AssistantEntry(entry)
        case EntryKind.TOOL_RESULT:
            return None  # drawn on its tool call's line
    return NoteEntry(entry)


class Transcript(VerticalScroll):
    """The scrolling transcript. Sticks to the bottom while the user has not scrolled up."""

    DEFAULT_CSS = """
    Transcript {
        height: 1fr;
        padding: 0 1 1 1;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._widgets: dict[str, EntryWidget] = {}
        # What the widgets were last given, by id: records are immutable values and the
        # reducer keeps unchanged ones as the same objects, so `is` finds what changed.
        self._seen: dict[str, object] = {}
        self._seen_output: dict[str, str] = {}  # call id -> the live output last drawn

    def on_resize(self, event: events.Resize) -> None:
        # Anchor (stick to the bottom) only once there is more than a screenful: an
        # anchored short transcript would sit at the bottom with a gap above it.
        if (
            not self.is_anchored
            and event.virtual_size.height > self.scrollable_content_region.height
        ):
            self.anchor()

    def widget_for(self, entry_id: str) -> Widget | None:
        return self._widgets.get(entry_id)

    def _changed(self, items: Iterable[Any]) -> list[Any]:
        changed = [item for item in items if self._seen.get(item.id) is not item]
        self._seen.update((item.id, item) for item in changed)
        return changed

    async def show(self, view: ConversationView) -> None:
        """Bring the widgets up to date with `view`: mount new entries, update changed ones.

        Only entries whose value changed are visited, plus the assistant entries whose
        tool calls, results or run changed (they draw those too).
        """
        dirty = {e.id for e in self._changed(view.entries)}
        calls = {c.id: c for c in view.tool_calls}
        for entry in view.entries:
            if entry.kind == EntryKind.TOOL_RESULT and entry.id in dirty:
                call = calls.get(entry.data.get("tool_call_id", ""))
                if call is not None:
                    dirty.add(call.entry_id)
        dirty.update(c.entry_id for c in self._changed(view.tool_calls))
        for call_id, output in view.tool_output.items():
            if self._seen_output.get(call_id) is not output and call_id in calls:
                self._seen_output[call_id] = output
                dirty.add(calls[call_id].entry_id)
        runs = {r.id for r in self._changed(view.runs)}
        if runs:
            dirty.update(
                e.id for e in view.entries if e.run_id in runs and e.kind == EntryKind.ASSISTANT
            )
        new: list[EntryWidget] = []
        for entry in view.entries:
            if entry.id not in dirty:
                continue
            if entry.id not in self._widgets:
                made = entry_widget(entry)
                if made is None:
                    continue
                self._widgets[entry.id] = made
                new.append(made)
        if new:
            await self.mount_all(new)
        for entry in view.entries:
            widget = self._widgets.get(entry.id)
            if widget is not None and entry.id in dirty:
                await widget.show(entry, view)
