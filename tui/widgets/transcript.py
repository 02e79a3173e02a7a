"""The transcript: a window of entry widgets over the view, whose cost follows the screen.

`Transcript.show(view)` is called once per frame with the newest view. Only
entries whose value changed are visited (records are immutable and the reducer
keeps unchanged ones as the same objects, so `is` finds what changed).

Only a window of the transcript is mounted, bounded above and below. Opening a
long session mounts the entries that fill the last few screens, so its end shows
at once; scrolling to the top of what is mounted mounts earlier entries (and
earlier segments of a long answer) above, keeping what is on screen in place, and
unmounts rows far below (`MOST_MOUNTED`); scrolling back down mounts them again
and unmounts rows far above. So memory stays bounded at any place in any session.
While the transcript follows the bottom, entries far above it are unmounted
again, so a long stream lays out a bounded number of widgets per frame.
`jump_home` and `jump_end` (Ctrl+Home / Ctrl+End) put the window at the first or
the last turn at once; `jump_to` at any entry. When the user has scrolled up and
new text arrives below, a "new output below" line says so.

A show, a jump and a reveal each make rows and await their mount, so they take
turns (`_window_lock`); and a row is composed (an answer has its first text
segment) only once its mount is done, so only then is it in `_widgets`, where a
show and a render ahead find the rows to draw into.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from textual import events
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget

from tui.textual_compat import BarsInItsPass, LaidOutOnce, anchor_in_layout, following_anchor

if TYPE_CHECKING:  # the entries' widgets load with the first view, after the first frame
    from collections.abc import Iterator

    from textual.geometry import Size
    from textual.layout import DockArrangeResult

    from runtime import ConversationView
    from runtime.model.records import Entry, ToolCallRecord
    from runtime.model.views import LiveText
    from tui.widgets.entries import AssistantEntry, EntryWidget

__all__ = ["Transcript"]

KEPT_ENTRIES = 40  # entries left mounted while the transcript follows the bottom
OPEN_SCREENS = 1.25  # opening a session mounts about this many screenfuls from the end
REVEAL_BATCH = 8  # entries (or segments) mounted above at a time on the way up, at first
# Each reveal lays out every mounted row, so a batch grows with what is mounted (a
# quarter of it, up to REVEAL_MOST): going up a 2,000-turn session is ~80 reveals,
# not ~1,000 layouts of ever more rows.
REVEAL_MOST = 128
#: Rows mounted at most away from the bottom: past it, revealing rows above unmounts
#: rows far below (and the other way), so memory does not grow with the scroll.
MOST_MOUNTED = 160
JUMP_ROWS = 24  # rows a jump mounts from the entry it goes to


def _rough_lines(entry: Entry, width: int) -> int:
    """About how many lines `entry` takes on screen (to pick what to mount first)."""
    text = entry.text
    tools = len(entry.data.get("tool_calls") or ())
    return 2 + text.count("\n") + len(text) // max(20, width) + 2 * tools


class Transcript(VerticalScroll, LaidOutOnce, BarsInItsPass, can_focus=False):
    """The scrolling transcript. Sticks to the bottom while the user has not scrolled up.

    It never takes the focus: a click or a mouse selection over it leaves the keys
    going to the prompt (its scroll keys are the app's; the wheel needs no focus).
    """

    DEFAULT_CSS = """
    Transcript {
        height: 1fr;
        padding: 0 1 1 1;
        scrollbar-size-vertical: 1;
        /* The bar is there from the start, its track the colour of the screen: with
           `auto`, the frame in which the entries first outgrow the screen would show
           it and lay everything out twice more (the bar, then its first size). */
        overflow-y: scroll;
        scrollbar-background: $background;
        scrollbar-background-hover: $background;
        scrollbar-background-active: $background;
    }
    """

    class NewOutput(Message):
        """New output arrived below while the user is scrolled up (or, False, caught up)."""

        def __init__(self, below: bool) -> None:
            super().__init__()
            self.below = below

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._order: list[str] = []  # ids of the entries that have a row, in order
        self._known: set[str] = set()  # every entry id seen (rows or not)
        self._first = 0  # index in _order of the first mounted row
        self._last: int | None = None  # index past the last mounted row (None: the end)
        self._home_wanted = False  # Ctrl+Home before the session's earlier entries came
        self._widgets: dict[str, EntryWidget] = {}  # mounted rows only (`_mount_rows`)
        self._seen: dict[str, object] = {}  # id -> the value last given to the widgets
        self._seen_output: dict[str, str] = {}  # call id -> the live output last drawn
        # The view's entries, tool calls and runs as last walked (see `_dirty`), and its
        # tool calls by id.
        self._walked: tuple[object, object, object] = (None, None, None)
        self._calls: tuple[object, dict[str, ToolCallRecord]] = (None, {})
        self._opened = False
        # The answers streaming at the last show or since, with the newest text seen.
        self._live_seen: dict[str, LiveText] = {}
        self._ended: dict[str, tuple[Entry, LiveText]] = {}  # see `_settled_text`
        self._revealing = False
        self._lock: asyncio.Lock | None = None  # (made on the app's loop, at first use)
        self._new_below = False
        self._scrolled_up = False  # before anchoring: the user scrolled up
        self.view: ConversationView | None = None

    # --- following the bottom -----------------------------------------------

    @property
    def following(self) -> bool:
        """New output scrolls into view by itself: the user has not scrolled away from the
        bottom. Before the transcript is anchored (it anchors once it outgrows the screen,
        after a layout) that is: the user has not scrolled up."""
        if self.is_anchored:
            return following_anchor(self)
        return not self._scrolled_up

    def _anchor_when_long(self) -> None:
        # Anchor (stick to the bottom) only once there is more than a screenful: an
        # anchored short transcript would sit at the bottom with a gap above it. Not if
        # the user has scrolled up meanwhile: anchoring would take them to the bottom.
        if (
            not self.is_anchored
            and self.virtual_size.height > self.scrollable_content_region.height
            and self.following
        ):
            self.anchor()

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """Textual's arrangement; and the layout in which the entries first outgrow the
        screen anchors the transcript. The compositor scrolls an anchored widget to
        its end in the same pass that arranged it, so the frame that first fills the
        screen also shows its end: anchoring after it (`anchor()`, which scrolls)
        would draw the whole transcript twice, at the busiest moment of an answer.
        (`anchor()` is that flag and a scroll; here the compositor does the scroll.)"""
        arrangement = super().arrange(size, optimal)
        if (
            not optimal
            and not self.is_anchored
            and self.following
            and arrangement.total_region.bottom > size.height
        ):
            anchor_in_layout(self)
        return arrangement

    def on_resize(self, event: events.Resize) -> None:
        self._anchor_when_long()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if not self.is_anchored:  # up and away from the bottom (not a clamp as it shrank)
            self._scrolled_up = new < self.max_scroll_y - 1 and (new < old or self._scrolled_up)
        if new <= 1 and not self._revealing and not self.following and self._has_earlier():
            self._revealing = True
            self.call_after_refresh(self._reveal_earlier)
        elif (
            self._last is not None
            and not self._revealing
            and new >= self.max_scroll_y - 1
            and new > old
        ):
            self._revealing = True
            self.call_after_refresh(self._reveal_later)
        if self._new_below and self.following:
            self._new_below = False
            self.post_message(self.NewOutput(False))

    def widget_for(self, entry_id: str) -> Widget | None:
        return self._widgets.get(entry_id)

    # --- the window -----------------------------------------------------------

    def _has_earlier(self) -> bool:
        if self._first > 0:
            return True
        if not self._order:
            return False
        from tui.widgets.entries import AssistantEntry

        first = self._widgets.get(self._order[0])
        return isinstance(first, AssistantEntry) and first.hidden_segments > 0

    def _first_mounted(self) -> EntryWidget | None:
        return self._widgets.get(self._order[self._first]) if self._order else None

    async def _reveal_earlier(self) -> None:
        """Mount what is just above the window, keeping the screen where it is."""
        from tui.widgets.entries import AssistantEntry

        try:
            async with self._window_lock():
                top = self._first_mounted()
                if top is None or self.view is None:
                    self._revealing = False
                    return
                before = self.virtual_size.height
                batch = min(REVEAL_MOST, max(REVEAL_BATCH, (len(self._order) - self._first) // 4))
                if isinstance(top, AssistantEntry) and top.hidden_segments:
                    top.following = False
                    await top.reveal_earlier(REVEAL_BATCH)
                elif self._first > 0:
                    start = max(0, self._first - batch)
                    made = self._make_rows(self._order[start : self._first], following=False)
                    self._first = start
                    await self._mount_rows(made, before=top)
                    await self._show_rows(made)
                    await self._trim_below()
                self.call_after_refresh(self._keep_place, before)
        except Exception:
            self._revealing = False
            raise

    async def _show_rows(self, made: list[EntryWidget]) -> None:
        assert self.view is not None
        by_id = {e.id: e for e in self.view.settled}
        for widget in made:
            await widget.show(by_id[widget.entry_id], self.view)

    def _end(self) -> int:
        return len(self._order) if self._last is None else self._last

    async def _trim_below(self) -> None:
        """Unmount the rows past MOST_MOUNTED from the top of the window (they are below
        the screen: what is on screen stays where it is)."""
        extra = self._end() - self._first - MOST_MOUNTED
        if extra <= 0:
            return
        end = self._end()
        ids = self._order[end - extra : end]
        self._last = end - extra
        dropped = [w for w in (self._widgets.pop(i, None) for i in ids) if w is not None]
        await self.remove_children(dropped)

    async def _reveal_later(self) -> None:
        """Mount what is just below the window (scrolled down to its end), unmounting
        rows far above it; at the transcript's end, it follows the bottom again."""
        try:
            async with self._window_lock():
                if self._last is None or self.view is None:
                    return
                stop = min(len(self._order), self._last + REVEAL_MOST)
                made = self._make_rows(self._order[self._last : stop], following=False)
                self._last = None if stop >= len(self._order) else stop
                await self._mount_rows(made)
                await self._show_rows(made)
                extra = self._end() - self._first - MOST_MOUNTED
                if extra > 0:  # the rows far above go; the screen keeps its place
                    ids = self._order[self._first : self._first + extra]
                    self._first += extra
                    dropped = [w for w in (self._widgets.pop(i, None) for i in ids) if w]
                    gone = sum(w.outer_size.height for w in dropped)
                    await self.remove_children(dropped)
                    self.scroll_to(y=max(0, self.scroll_y - gone), animate=False, immediate=True)
        finally:
            self._revealing = False

    # --- jumps -------------------------------------------------------------------

    async def jump_to(self, index: int) -> None:
        """Put the window at `_order[index]` (an entry's row), its row at the top of
        the screen; the rows around are mounted as the user scrolls from there."""
        async with self._window_lock():
            await self._jump_to(index)

    async def _jump_to(self, index: int) -> None:
        if not self._order or self.view is None:
            return
        index = max(0, min(index, len(self._order) - 1))
        self.anchor(False)
        self._scrolled_up = True
        await self.remove_children(list(self._widgets.values()))
        self._widgets.clear()
        stop = min(len(self._order), index + JUMP_ROWS)
        self._first, self._last = index, (None if stop >= len(self._order) else stop)
        made = self._make_rows(self._order[index:stop], following=False)
        await self._mount_rows(made)
        await self._show_rows(made)
        self.call_after_refresh(self.scroll_home, animate=False, immediate=True)

    async def jump_home(self) -> None:
        """The first turn at the top of the screen (Ctrl+Home); pressed before a stored
        session's earlier entries came (it opens on a view of its end), again when
        they do."""
        async with self._window_lock():
            view = self.view
            self._home_wanted = view is not None and bool(view.earlier)
            await self._jump_to(0)

    async def jump_end(self) -> None:
        """The last turn, following the bottom again (Ctrl+End)."""
        async with self._window_lock():
            if self.view is None:
                return
            self._home_wanted = False
            if self._last is not None:
                await self.remove_children(list(self._widgets.values()))
                self._widgets.clear()
                self._first, self._last = self._opening_window(self.view), None
                made = self._make_rows(self._order[self._first :], following=True)
                await self._mount_rows(made)
                await self._show_rows(made)
            self._scrolled_up = False
            self.anchor()

    def index_of(self, entry_id: str) -> int | None:
        """Where entry `entry_id` is in the transcript's order (None: it has no row)."""
        try:
            return self._order.index(entry_id)
        except ValueError:
            return None

    def _keep_place(self, before: int) -> None:
        # Not if the user went back to the bottom meanwhile (End, a click on the
        # new-output line): the scroll would take them off it and release the anchor.
        added = self.virtual_size.height - before
        if added > 0 and not self.following:
            self.scroll_to(y=self.scroll_y + added, animate=False, immediate=True)
        self._revealing = False

    def _make_rows(self, ids: list[str], *, following: bool) -> list[EntryWidget]:
        """The rows of entries `ids` (not mounted: see `_mount_rows`)."""
        from tui.widgets.entries import AssistantEntry, entry_widget

        assert self.view is not None
        made: list[EntryWidget] = []
        if not ids:
            return made  # (without walking the entries)
        by_id = {e.id: e for e in self.view.settled}
        for entry_id in ids:
            entry = by_id.get(entry_id)
            widget = entry_widget(entry) if entry is not None else None
            if widget is None:
                continue
            if isinstance(widget, AssistantEntry):
                widget.following = following
            made.append(widget)
        return made

    async def _mount_rows(self, made: list[EntryWidget], before: Widget | None = None) -> None:
        """Mount `made` (before row `before`, or at the end), and only then count them as
        rows: until its mount is done a row is not composed (an answer has no text
        segment yet), and a show or a render ahead must not find it meanwhile."""
        if made:
            await self.mount_all(made, before=before)
            self._widgets.update((widget.entry_id, widget) for widget in made)

    def _window_lock(self) -> asyncio.Lock:
        """Held by each change to the window (a show, a jump, a reveal): each makes rows
        and awaits their mount, and another change meanwhile would work on rows that
        are half made or already gone."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _trim(self) -> None:
        """While following the bottom, unmount the rows above the last KEPT_ENTRIES."""
        extra = len(self._order) - self._first - KEPT_ENTRIES
        if extra <= 0 or not self.following or self._last is not None:
            return
        ids = self._order[self._first : self._first + extra]
        self._first += extra
        dropped = [w for w in (self._widgets.pop(i, None) for i in ids) if w is not None]
        await self.remove_children(dropped)

    def _opening_window(self, view: ConversationView) -> int:
        """The index in _order to mount from when a session opens: its last screens.
        (Before its first layout, as a stored session's first view is shown, it has no
        size yet: the screen's is a little more than it will have.)"""
        size = self.size if self.size.height else self.app.size
        want = OPEN_SCREENS * max(size.height, 24)  # rough lines undercount markdown
        width = max(size.width, 40)
        rows = {e.id: e for e in view.settled}
        lines, index = 0, len(self._order)
        while index > 0 and lines < want:
            index -= 1
            lines += _rough_lines(rows[self._order[index]], width)
        return index

    # --- the view --------------------------------------------------------------

    def _dirty(self, view: ConversationView) -> set[str]:
        """Ids of the entries to redraw: changed values, their tool calls, results, runs.

        The reducer keeps each unchanged part of a view as the same tuple, so a part is
        walked only when it is not the one walked last: a frame of streamed text visits
        the live entries and their tool output, not the whole transcript."""
        walked, self._walked = self._walked, (view.settled, view.tool_calls, view.runs)
        dirty: set[str] = set()
        for entry_id, live in view.live.items():
            key = ("live", entry_id)
            if self._seen.get(key) is not live:  # type: ignore[call-overload]
                self._seen[key] = live  # type: ignore[index]
                dirty.add(entry_id)
        for entry_id, thought in view.reasoning.items():  # reasoning still streaming
            key = ("reasoning", entry_id)
            if self._seen.get(key) is not thought:  # type: ignore[call-overload]
                self._seen[key] = thought  # type: ignore[index]
                dirty.add(entry_id)
        if view.settled is not walked[0]:
            self._dirty_entries(view, dirty)
        calls = self._calls_of(view)
        if view.tool_calls is not walked[1]:
            for call in view.tool_calls:
                if self._seen.get(call.id) is not call:
                    self._seen[call.id] = call
                    dirty.add(call.entry_id)
        for call_id, output in view.tool_output.items():
            if self._seen_output.get(call_id) is not output and call_id in calls:
                self._seen_output[call_id] = output
                dirty.add(calls[call_id].entry_id)
        if view.runs is not walked[2]:
            self._dirty_runs(view, dirty)
        return dirty

    def _dirty_entries(self, view: ConversationView, dirty: set[str]) -> None:
        """Add the entries whose value changed, and the calls whose result did."""
        from runtime.model.records import EntryKind

        seen = self._seen
        for entry in view.settled:
            if seen.get(entry.id) is not entry:
                seen[entry.id] = entry
                dirty.add(entry.id)
                if entry.kind == EntryKind.TOOL_RESULT:
                    call = self._calls_of(view).get(entry.data.get("tool_call_id", ""))
                    if call is not None:
                        dirty.add(call.entry_id)

    def _dirty_runs(self, view: ConversationView, dirty: set[str]) -> None:
        """Add the answers of the runs that changed (their state shows under them)."""
        from runtime.model.records import EntryKind

        runs = set()
        for run in view.runs:
            if self._seen.get(run.id) is not run:
                self._seen[run.id] = run
                runs.add(run.id)
        if runs:
            dirty.update(
                e.id for e in view.settled if e.run_id in runs and e.kind == EntryKind.ASSISTANT
            )

    def _calls_of(self, view: ConversationView) -> dict[str, ToolCallRecord]:
        """`view`'s tool calls by id (made once per tuple of them)."""
        if self._calls[0] is not view.tool_calls:
            self._calls = (view.tool_calls, {c.id: c for c in view.tool_calls})
        return self._calls[1]

    def _streaming(self, view: ConversationView) -> Iterator[tuple[AssistantEntry, LiveText]]:
        """Each mounted answer streaming in `view`, or whose stream ended since the last
        frame (its last text comes with the settled entry), with its text there."""
        from tui.widgets.entries import AssistantEntry

        for entry_id, text in view.live.items():
            widget = self._widgets.get(entry_id)
            if isinstance(widget, AssistantEntry):
                self._live_seen[entry_id] = text
                yield widget, text
        ended = self._live_seen.keys() - view.live.keys()
        for entry in self._mounted(view, ended) if ended else ():
            widget = self._widgets.get(entry.id)
            if isinstance(widget, AssistantEntry):
                yield widget, self._settled_text(entry, self._live_seen[entry.id])

    def _settled_text(self, entry: Entry, last: LiveText) -> LiveText:
        """The text of an answer that ended since the last show, going on from `last`, the
        newest live text seen of it: the widget then finds it extends what it read without
        comparing the whole answer (2 MB, on every look while output is held). Made
        once per value of the entry."""
        from runtime.model.views import LiveText

        kept = self._ended.get(entry.id)
        if kept is None or kept[0] is not entry:
            text = entry.text
            grown = last.append(text[len(last) :]) if text.startswith(str(last)) else None
            kept = self._ended[entry.id] = (entry, grown or LiveText.of(text))
        return kept[1]

    def read_ahead(self, view: ConversationView) -> None:
        """While new output is held off the screen: let each streaming answer read its
        new text now, so the frame that shows it only draws (see `AssistantEntry`)."""
        for widget, text in self._streaming(view):
            widget.read_ahead(text)

    def next_render(self, view: ConversationView) -> tuple[str, int] | None:
        """The next Markdown source (and width) showing `view` would render that is not
        rendered yet; None once none is left (see `AssistantEntry.next_render`)."""
        for widget, text in self._streaming(view):
            job = widget.next_render(text)
            if job is not None:
                return job
        return None

    def _mounted(self, view: ConversationView, ids: set[str]) -> list[Entry]:
        """The entries of `ids` that have a mounted row, in order: found from the end of
        the transcript, where what changes usually is."""
        wanted = {i for i in ids if i in self._widgets}
        found: list[Entry] = []
        if wanted:
            for entry in reversed(view.settled):
                if entry.id in wanted:
                    wanted.discard(entry.id)
                    found.append(entry)
                    if not wanted:
                        break
        return found[::-1]

    def _new_rows(self, view: ConversationView) -> tuple[list[str], list[str]]:
        """The ids of `view`'s entries that are new and have a row: those before the
        first known one (the view before left them out), and the rest."""
        from runtime.model.records import EntryKind

        had, before_known = bool(self._known), True
        earlier: list[str] = []
        fresh: list[str] = []
        for entry in view.settled:
            if entry.id in self._known:
                before_known = False
                continue
            self._known.add(entry.id)
            if entry.kind != EntryKind.TOOL_RESULT:
                (earlier if had and before_known else fresh).append(entry.id)
        return earlier, fresh

    async def show(self, view: ConversationView) -> None:
        """Bring the mounted rows up to date with `view`; mount new entries at the end.

        One change to the window at a time (`_window_lock`): the session's first view and
        the follow loop's next one can overlap, and so can a jump or a reveal."""
        async with self._window_lock():
            await self._show(view)

    async def _show(self, view: ConversationView) -> None:
        from tui.widgets.entries import AssistantEntry

        self.view = view
        grown = view.settled is not self._walked[0]
        dirty = self._dirty(view)
        earlier, fresh = self._new_rows(view) if grown else ([], [])
        if earlier:  # a whole view after one of the session's end: they go above, unmounted
            self._order[:0] = earlier
            self._first += len(earlier)
            if self._last is not None:
                self._last += len(earlier)
            if self._home_wanted:  # Ctrl+Home before they came: the first turn is theirs
                self.call_after_refresh(self.jump_home)
        self._order.extend(fresh)
        unseen = bool(fresh) and self._last is not None
        if unseen:  # the window ends above the end: nothing new is mounted (said below)
            fresh = []
        following = self.following
        if not self._opened:
            self._opened = True
            self._first = self._opening_window(view)
            fresh = self._order[self._first :]
            if self._first > 0 and following:  # over a screenful: the first frame shows its end
                self.anchor()
        made = self._make_rows(fresh, following=following)
        await self._mount_rows(made)
        grew = bool(made)
        for entry in self._mounted(view, dirty):
            widget = self._widgets[entry.id]
            if isinstance(widget, AssistantEntry):
                widget.following = following
                grew = grew or entry.id in view.live
            await widget.show(entry, view)
        # `following` again, not the one read before the awaits: the user may have gone
        # back to the bottom while the rows were shown, and the marker would then stick.
        if (grew or unseen) and not self.following and not self._new_below:
            self._new_below = True
            self.post_message(self.NewOutput(True))
        await self._trim()
        self._live_seen = dict(view.live)
        self._ended.clear()
        if not self.is_anchored:
            self.call_after_refresh(self._anchor_when_long)
