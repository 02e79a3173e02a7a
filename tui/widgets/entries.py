"""The transcript's rows: one widget per entry, kept current from the view alone.

Entries are immutable values, so an entry widget compares what it last drew by
identity and does nothing when nothing changed. Assistant text is Markdown
drawn by `MarkdownText` (one widget, rendered to lines by Rich). A long answer
is drawn as segments (see `segments`): only the last one, of at most a few
hundred characters past its last block boundary, is redrawn as text arrives;
earlier ones are drawn once, and ones far above the screen are dropped while
the transcript follows the bottom and drawn again on the way up. A text that
no longer extends what was shown (a retried attempt, a resync) is redrawn once.

Tool results are not separate rows: each tool call is drawn under the
assistant turn that made it, as `name args` and the first line of its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.reactive import var
from textual.widgets import Static

from runtime import ConversationView, split_attachments
from runtime.model.records import (
    SUPERSEDED,
    Approval,
    Entry,
    EntryKind,
    EntryStatus,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.views import LiveText, call_summary
from tui.markup import escape
from tui.textual_compat import LaidOutOnce
from tui.toolrows import row_words
from tui.widgets.command_output import CommandOutput
from tui.widgets.markdown import MarkdownText, headroom_for, is_rendered
from tui.widgets.review import row_diff_markup
from tui.widgets.segments import Splitter

__all__ = [
    "AssistantEntry",
    "EntryWidget",
    "NoteEntry",
    "ToolCallLine",
    "UserEntry",
    "entry_widget",
]

SEGMENT_CHARS = 600  # a long answer's segments close at the first cut past this many characters
KEPT_SEGMENTS = 6  # at most this many segments of one answer stay mounted while following
JUMP_SEGMENTS = 2  # segments drawn when the text got ahead of the screen by more than those


def first_line(text: str, limit: int = 120) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


class UserEntry(Static, LaidOutOnce):
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
    UserEntry.from-agent {
        border-left: outer $accent;
        background: $accent 6%;
        text-style: none;
    }
    """

    def __init__(self, entry: Entry) -> None:
        # (a background agent's answer sent to its parent: set off as the agent's, not yours)
        agent = bool(entry.data.get("from_agent"))
        super().__init__(
            user_markup(entry.text), markup=True, classes="from-agent" if agent else ""
        )
        self.entry = entry
        self.entry_id = entry.id

    async def show(self, entry: Entry, view: ConversationView) -> None:
        if entry is not self.entry:
            self.entry = entry
            self.update(user_markup(entry.text))


def user_markup(text: str) -> str:
    """The prompt as typed; each attached file one dim line under it, not its contents."""
    prompt, attachments = split_attachments(text)
    lines = [escape(prompt)]
    for attachment in attachments:
        colour = "$text-muted" if attachment.attached else "$warning"
        lines.append(f"[not bold {colour}]📎 {escape(attachment.summary())}[/]")
    return "\n".join(lines)


class NoteEntry(Static, LaidOutOnce):
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
        self.entry_id = entry.id

    @staticmethod
    def _label(entry: Entry) -> str:
        match entry.kind:
            case EntryKind.SUMMARY:
                from tui.run_words import summary_label

                return escape(summary_label(entry))
            case EntryKind.RESET if entry.data.get("handoff"):
                words = len(entry.text.split())
                return f"— context reset: the model goes on from its handoff note ({words} words) —"
            case EntryKind.RESET:
                return "— context reset —"
        return escape(first_line(entry.text))

    async def show(self, entry: Entry, view: ConversationView) -> None:
        if entry is not self.entry:
            self.entry = entry
            self.update(self._label(entry))


class ToolCallLine(Static, LaidOutOnce):
    """`● name args` and, once there is a result, `⎿ first line of it`.

    A finished run_command shows its exit code, duration and the tail of its output
    instead (see `command_output`); a click or Ctrl+O (the app's key, for the newest
    command) expands that to all of it and back.
    """

    DEFAULT_CSS = """
    ToolCallLine {
        padding: 0 1;
        color: $foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    expanded = var(False, toggle_class="-expanded")

    @dataclass
    class OpenSubagent(Message):
        """A `task` row was clicked (or Enter pressed on it): show that subagent."""

        conversation_id: str
        label: str

    def __init__(self, call: dict[str, str], classes: str = "") -> None:
        super().__init__(classes=classes)
        self.call = call
        self.drawn: tuple[ToolCallRecord | None, Entry | None, str | None] | None = None
        self.command: CommandOutput | None = None  # a finished command's output
        self.subagent: tuple[str, str] | None = None  # (its conversation, its label)

    @property
    def expandable(self) -> bool:
        return self.command is not None and self.command.expandable

    def show(
        self, record: ToolCallRecord | None, result: Entry | None, output: str | None = None
    ) -> None:
        key = (record, result, output)
        if self.drawn is not None and all(a is b for a, b in zip(key, self.drawn, strict=True)):
            return
        self.drawn = key
        self.command = CommandOutput.of(record)
        self.subagent = subagent_of(record)
        self.can_focus = self.subagent is not None  # Enter on it opens the subagent
        self._draw()

    def _draw(self) -> None:
        if self.drawn is None:
            return
        record, result, output = self.drawn
        if self.command is None:
            shown = self.render_markup(self.call, record, result, output)
            if self.subagent is not None:
                shown += f"\n  [$foreground-muted]└ subagent {self.subagent[0][:13]}… · click or Enter: its transcript[/]"
            self.update(shown)
            return
        glyph = _call_state(record, result)[0]
        head = Content.from_markup(_words_head(self.call, record, glyph) or _head(self.call, glyph))
        parts = [head, self.command.content(self.expanded)]
        allowed = row_diff_markup(record)  # (a command has no diff: the rule that let it run)
        if allowed:
            parts.insert(1, Content.from_markup(allowed))
        self.update(Content("\n").join(parts))

    def watch_expanded(self) -> None:
        self._draw()

    def on_click(self) -> None:
        if self.subagent is not None:
            self.post_message(self.OpenSubagent(*self.subagent))
        elif self.expandable:
            self.expanded = not self.expanded

    def key_enter(self) -> None:
        if self.subagent is not None:
            self.post_message(self.OpenSubagent(*self.subagent))

    @staticmethod
    def render_markup(
        call: dict[str, str],
        record: ToolCallRecord | None,
        result: Entry | None,
        output: str | None = None,
    ) -> str:
        glyph, note = _call_state(record, result)
        words = _words_head(call, record, glyph)
        if words is not None:  # finished: what it did, in words (the diff under an edit)
            diff = row_diff_markup(record)
            return f"{words}\n{diff}" if diff else words
        head = _head(call, glyph)
        if result is not None and result.text.strip():
            tone = "$foreground-muted" if result.data.get("ok", True) else "$error"
            note = f"[{tone}]{escape(first_line(result.text))}[/]"
        elif output and record is not None and record.state == ToolCallState.RUNNING:
            note = _output_tail(output)
        shown = f"{head}\n  [$foreground-muted]└[/] {note}" if note else head
        diff = row_diff_markup(record)  # a write's or edit's diff, once answered
        return f"{shown}\n{diff}" if diff else shown


def subagent_of(record: ToolCallRecord | None) -> tuple[str, str] | None:
    """(conversation id, "agent (task)") of the subagent a `task` call started, if any."""
    process = record.process if record is not None else None
    if not process or not isinstance(process.get("child"), str):
        return None
    agent, what = str(process.get("agent", "subagent")), str(process.get("description", ""))
    return process["child"], f"{agent} ({what})" if what and what != agent else agent


def _head(call: dict[str, str], glyph: str) -> str:
    args = escape(call_summary(call.get("name", ""), call.get("arguments", "{}")))
    return f"{glyph} [b]{escape(call.get('name', '?'))}[/b] [$foreground-muted]{args}[/]"


def _words_head(call: dict[str, str], record: ToolCallRecord | None, glyph: str) -> str | None:
    """`● Edited src/app.py  +12 −3`: a finished call in words (`tui.toolrows`), its
    verb in bold; None while it runs or asks, or for a tool without words."""
    if record is None or record.state not in (ToolCallState.DONE, ToolCallState.DENIED):
        return None
    words = row_words(call.get("name", ""), call.get("arguments", "{}"), record)
    if words is None:
        return None
    verb, _, rest = words.partition(" ")
    tone = "$error" if verb == "Refused:" else "$foreground"
    return f"{glyph} [b {tone}]{escape(verb)}[/] {escape(rest)}"


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


class AssistantEntry(Vertical, LaidOutOnce):
    """An assistant turn: Markdown segments, its tool calls, and how it ended if not well."""

    DEFAULT_CSS = """
    AssistantEntry {
        height: auto;
        margin: 1 0 0 0;
    }
    AssistantEntry > MarkdownText.-after {
        margin: 1 0 0 0;
    }
    AssistantEntry.-text > ToolCallLine.-first {
        margin: 1 0 0 0;
    }
    AssistantEntry > MarkdownText.-empty {
        height: 0;  /* laid out (at its width) but no line: the first text only grows it */
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
        self.entry_id = entry.id
        self.following = True  # set by the transcript: may drop segments above the screen
        self._live = LiveText.of(entry.text)  # the text to show next (set by `show`)
        self._shown = LiveText.of("")  # the text written to the segments so far
        self._splitter = Splitter(SEGMENT_CHARS)
        self._read = self._shown  # the text the splitter has read (may run ahead of shown)
        self._segments: list[MarkdownText] = []  # mounted, in order; the last may grow
        self._hidden = 0  # segments before the first mounted one (dropped above)
        self._calls: dict[str, ToolCallLine] = {}
        self._marker_key: tuple[str, str, bool, bool] | None = None
        self._thinking = False  # reasoning is shown (its fold)

    def compose(self) -> ComposeResult:
        from tui.widgets.reasoning import ReasoningFold

        yield ReasoningFold()
        first = _markdown(classes="-empty")
        self._segments.append(first)
        yield first
        yield Static(classes="marker")

    @property
    def text_shown(self) -> str:
        """The text written to the segments so far (what the screen shows)."""
        return str(self._shown)

    @property
    def hidden_segments(self) -> int:
        return self._hidden

    async def show(self, entry: Entry, view: ConversationView) -> None:
        live = view.text_of(entry)
        if entry is not self.entry or live is not self._live:
            self.entry, self._live = entry, live
            await self._show_text(entry)
        await self._show_calls(entry, view)
        self._show_reasoning(entry, view)
        self._show_marker(entry, view)

    def _show_reasoning(self, entry: Entry, view: ConversationView) -> None:
        from tui.widgets.reasoning import ReasoningFold

        live = view.reasoning.get(entry.id)
        text = str(live) if live is not None else str(entry.data.get("reasoning") or "")
        streaming = entry.status == EntryStatus.STREAMING and not len(self._live)
        self._thinking = bool(text)  # the fold says "thinking…": the marker need not
        self.query_one(ReasoningFold).show(text, streaming)

    def read_ahead(self, text: LiveText) -> None:
        """Find the cuts in `text` now, before it is shown: while the screen holds new
        output back (the user is typing), the frame that finally shows it then only
        draws, instead of reading everything that came meanwhile at once."""
        if text.extends(self._read):
            self._splitter.feed(text)
            self._read = text

    async def _show_text(self, entry: Entry) -> None:
        text = self._live
        if not self._extends(text):  # a retried attempt, a resync: redraw once
            await self._restart()
        if len(text) > len(self._shown):
            await self._extend(text, len(self._shown))
        self._shown = text
        if len(text) >= len(self._read):
            self._read = text
        self._segments[0].set_class(not len(text), "-empty")
        self.set_class(bool(len(text)), "-text")
        self._space_segments()
        headroom = headroom_for(len(text)) if entry.status == EntryStatus.STREAMING else 1
        for segment in self._segments:
            segment.grow(headroom if segment is self._segments[-1] else 1)
        if self.following:
            await self._drop_above(self._segments_to_keep())

    async def _extend(self, text: LiveText, start: int) -> None:
        """Write `text` past `start`: the open segment grows, new cuts open new segments.

        Segment `i` is `text[cuts[i]:cuts[i + 1]]`. While following the bottom (or
        drawing from scratch) segments that would scroll off before they are seen,
        those before the last KEPT_SEGMENTS, are never drawn.
        """
        self._splitter.feed(text)
        restart, pieces = self._pieces(text, start)
        first = 0 if restart is not None else len(self._segments) - 1
        if restart is not None:
            await self._start_over_at(restart, len(pieces))
        for at, piece in enumerate(pieces, start=first):
            if at == len(self._segments):
                segment = _markdown()
                await self.mount(segment, after=self._segments[-1])
                self._segments.append(segment)
            self._write(piece, at)

    def _pieces(self, text: LiveText, start: int) -> tuple[int | None, list[str]]:
        """What `_extend` writes: the segment to start over at (None: go on from the
        open one), then the text added to the open segment and each new segment's text."""
        cuts = self._splitter.cuts
        total = len(cuts)
        open_index = self._hidden + len(self._segments) - 1
        restart = None
        if (self.following or start == 0) and total - KEPT_SEGMENTS > open_index:
            keep_from = max(total - JUMP_SEGMENTS, 0)
            if keep_from > open_index:
                restart = open_index = keep_from
                start = cuts[keep_from]
        pieces = []
        for index in range(open_index, total):
            end = len(text) if index == total - 1 else cuts[index + 1]
            pieces.append(text.slice(max(start, cuts[index]), end))
        return restart, pieces

    def _sources(self, restart: int | None, pieces: list[str]) -> list[str]:
        """The whole text of each segment that `pieces` will leave changed."""
        if not pieces:
            return []
        grown = pieces[0] if restart is not None else self._segments[-1].source + pieces[0]
        return [grown, *pieces[1:]]

    def _text_width(self) -> int:
        """The width the segments' text is drawn at (0 before the first layout)."""
        segment = self._segments[0]
        return max(self.content_size.width - segment.styles.gutter.width, 0)

    def next_render(self, text: LiveText) -> tuple[str, int] | None:
        """The next segment source (and width) that showing `text` would render and is
        not rendered yet; None once there is none. BastionApp._render_ahead renders
        each aside (`markdown.render_aside`) before the frame that shows `text`, which
        then finds them and only lays them out."""
        width = self._text_width()
        if not width or not self._extends(text):  # not laid out yet; or drawn afresh
            return None
        self.read_ahead(text)
        start = len(self._shown)
        sources = self._sources(*self._pieces(text, start)) if len(text) > start else []
        for source in sources:
            if source and not is_rendered(self.app, source, width):
                return source, width
        return None

    def _extends(self, text: LiveText) -> bool:
        """`text` goes on from what was shown and read ahead (else it is drawn afresh:
        a retried attempt, a resync, or text read ahead that was then replaced)."""
        return text.extends(self._shown) and text.extends(self._read)

    async def _start_over_at(self, index: int, count: int) -> None:
        """Segment `index` is drawn next, in the first of the `count` segments kept
        (emptied) from those mounted: the rest are unmounted, and the text written
        past them (`_write`) fills them in order."""
        kept, dropped = self._segments[:count], self._segments[count:]
        if dropped:
            await self.remove_children(dropped)
        for segment in kept:
            segment.set_source("")
        self._segments, self._hidden = kept, index

    def _write(self, piece: str, at: int) -> None:
        """Add `piece` to the mounted segment `at`."""
        if piece:
            segment = self._segments[at]
            segment.set_source(segment.source + piece)

    async def _restart(self) -> None:
        """Forget what was drawn: one empty segment, the splitter from the start."""
        first, rest = self._segments[0], self._segments[1:]
        if rest:
            await self.remove_children(rest)
        self._segments = [first]
        first.set_source("")
        self._shown, self._hidden = LiveText.of(""), 0
        self._read = self._shown
        self._splitter = Splitter(SEGMENT_CHARS)

    def _segments_to_keep(self) -> int:
        """The last segments that fill a screen and a quarter (JUMP_SEGMENTS to KEPT of them)."""
        want = self.app.size.height * 5 // 4
        lines, keep = 0, 0
        for segment in reversed(self._segments):
            if keep >= JUMP_SEGMENTS and lines >= want:
                break
            lines += segment.outer_size.height
            keep += 1
        return min(max(keep, JUMP_SEGMENTS), KEPT_SEGMENTS)

    async def _drop_above(self, keep: int) -> None:
        """Unmount all but the last `keep` segments (they are drawn again on the way up)."""
        extra = len(self._segments) - keep
        if extra > 0:
            dropped, self._segments = self._segments[:extra], self._segments[extra:]
            self._hidden += extra
            await self.remove_children(dropped)

    async def reveal_earlier(self, count: int) -> int:
        """Draw up to `count` dropped segments back above the first shown; how many."""
        count = min(count, self._hidden)
        cuts = self._splitter.cuts
        for index in range(self._hidden - 1, self._hidden - 1 - count, -1):
            segment = _markdown()
            await self.mount(segment, before=self._segments[0])
            self._segments.insert(0, segment)
            segment.set_source(self._shown.slice(cuts[index], cuts[index + 1]))
        self._hidden -= count
        self._space_segments()
        return count

    def _space_segments(self) -> None:
        """A blank line between segments (the first mounted one has none above it)."""
        for index, segment in enumerate(self._segments):
            segment.set_class(index > 0, "-after")

    async def _show_calls(self, entry: Entry, view: ConversationView) -> None:
        calls = entry.data.get("tool_calls") or ()
        if not calls:
            return
        records = {c.id: c for c in view.tool_calls if c.entry_id == entry.id}
        for call in calls:
            key = call.get("key") or call["id"]  # the call's own key (older entries: its id)
            line = self._calls.get(key)
            if line is None:
                line = self._calls[key] = ToolCallLine(
                    call, classes="" if self._calls else "-first"
                )
                await self.mount(line, before=self.query_one(".marker"))
            record = records.get(key)
            result = (
                view.entry(record.result_entry_id) if record and record.result_entry_id else None
            )
            line.show(record, result, view.tool_output.get(key))

    def _show_marker(self, entry: Entry, view: ConversationView) -> None:
        """Under the text: `thinking…` before the first token, or how the turn ended badly."""
        waiting = entry.status == EntryStatus.STREAMING and not len(self._live)
        waiting = waiting and not self._thinking
        message = ""
        run = view.run(entry.run_id) if entry.run_id else None
        if entry.status == EntryStatus.FAILED:
            message = (run.error or {}).get("message", "") if run and run.error else ""
        # The user superseded its run: kept here, left out of the model's context.
        gone = run is not None and run.reason == SUPERSEDED and not waiting
        key = (entry.status, message, waiting, gone)
        if key == self._marker_key:
            return
        self._marker_key = key
        marker = self.query_one(".marker", Static)
        if waiting:
            marker.update("[$foreground-muted]thinking…[/]")
        elif gone:
            marker.update("[$warning]◼ superseded: left out of the model's context[/]")
        elif entry.status == EntryStatus.INTERRUPTED:
            marker.update("[$warning]◼ interrupted[/]")
        elif entry.status == EntryStatus.FAILED:
            reason = f": {escape(first_line(message))}" if message else ""
            marker.update(f"[$error]✗ failed{reason}[/]")
        ended_badly = entry.status in (EntryStatus.INTERRUPTED, EntryStatus.FAILED)
        marker.set_class(waiting or ended_badly or gone, "-shown")


def _markdown(classes: str | None = None) -> MarkdownText:
    return MarkdownText(classes=classes)


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
