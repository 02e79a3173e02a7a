"""Every Textual internal bastion relies on, in one place.

Textual is pinned to the minor range the suite ran on (pyproject.toml), and
`nox -s textual_next` runs the tui tests on the newest Textual and reports what
broke, without failing a landing. Each use below says why it is needed and which
test fails when it stops working:

- `XTermParser._sequence_to_key_events`: Alt+Enter as ESC CR (`install`).
  tests/tui/test_textual_compat.py (esc_cr) and the tmux Alt+Enter test.
- `App._begin_batch` / `_end_batch`: one repaint for what `batch_update` can
  only hold within a `with` block, across the awaits of opening a stored session
  (`begin_batch`, `end_batch`). tests/tui/test_textual_compat.py (batch).
- `Widget._anchored` / `_anchor_released`: whether the transcript follows the
  bottom, and anchoring it inside a layout (`following_anchor`, `anchor_in_layout`).
  tests/tui/test_long.py and tests/tui/test_textual_compat.py (anchor).
- `Widget._size_updated`: a widget that only grew taller asks for no second
  layout (`LaidOutOnce`). tests/tui/test_sizing.py.
- `Widget._size_updated`, `_repaint_required`, the scrollbars and
  `Screen._compositor.update_widgets`: a scrolling widget's scrollbars repainted in
  the pass that lays it out (`BarsInItsPass`). tests/tui/test_textual_compat.py (bars).
- `TextArea._on_key`: the prompt sees each key before the text area does
  (`KeysFirst`). tests/tui/test_textual_compat.py (keys_first) and the prompt tests.
- `Driver._app` and `Driver.process_message`: the moment a key is read, on the
  driver's thread (`noting_keys`). tests/tui/test_app.py (noting_keys).
- `App._driver.write`: raw output to the terminal, as `App.bell` and
  `App.copy_to_clipboard` use it, for a desktop notification (`write_raw`).
  tests/tui/test_notices.py.

## Alt+Enter as ESC CR

Terminals without the kitty keyboard protocol (tmux by default, most others) send
Alt+Enter as ESC then CR. Textual's parser reads ESC as "alt" but applies it only
to one-character key names, so the press arrives as plain Enter: a steer where
the user asked for a follow-up. `install()` wraps the parser so that ESC CR is
`alt+enter`.

## One layout per change (`LaidOutOnce`)
One layout per change: a transcript widget that only grew taller asks for no other.

After every layout, Textual gives each widget whose size changed its new size by
setting `virtual_size`, a reactive that asks for another layout and a repaint.
So each frame that resizes a widget (every frame of a stream that adds a line,
each catch-up after typing) is followed by a second layout and a full repaint
of the same screen: twice the work, and a key typed meanwhile waits for both.

That second layout matters when a width changed: a widget's height for its width
may have been measured (and cached) at another width, and Textual clears that
cache as it gives the size. A widget laid out before at the same width was
measured at that width by the layout that gave it the size, which also placed it
and marked it for redrawing, so it takes the size as Textual does when it only
scrolls (`layout=False`: set without asking for anything). So does a widget
given its first size (a segment or entry just mounted): nothing measured it at
another width before the layout that placed it.

`LaidOutOnce` goes last among a widget's bases: Textual takes a widget's default
CSS from its first base, so `class MarkdownText(Static, LaidOutOnce)` keeps
Static's. `_size_updated` is Textual's own (not public): with a Textual whose
`_size_updated` takes no `layout`, the mixin leaves it alone (and the second
layout comes back).

## Scrollbars in the pass that lays out their widget (`BarsInItsPass`)

In a layout, a scrolling widget that grew gives its scrollbar the new height and
position, which asks for a repaint: the layout's own pass does not take it (it
comes after the pass collected what to repaint), so the screen is composed and
written out once more a frame later for that one column, though the layout pass
drew the bar as it now is. While an answer streams the transcript grows a few
times a second, each time with that extra pass (35 of the ~160 passes of 15 s of
a 400 chars/s answer). `BarsInItsPass` hands the repaint to the pass under way as
the widget takes its size, before that pass composes the screen.

## The moment a key is read (`noting_keys`)
The terminal driver Textual picks, noting when a key or paste is read.

New output waits while the user types (`tui.pacing.hold`), from the moment of their
last key. The app handles a key a few turns of its event loop after the
driver's thread reads it (more while a frame is drawn), and a frame of held
output started in between would make that key wait for all of it. So the
driver sets the app's `typed_at` as it reads the key, on its own thread (one
float, written whole), before passing it on as Textual does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from inspect import signature
from typing import Any

from textual import events
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.driver import Driver
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import TextArea

__all__ = [
    "BarsInItsPass",
    "KeysFirst",
    "LaidOutOnce",
    "anchor_in_layout",
    "begin_batch",
    "end_batch",
    "following_anchor",
    "install",
    "noting_keys",
]

_ALT_NAMED = frozenset({"enter"})  # named keys whose alt form bastion binds


def install() -> None:
    """Patch once (idempotent)."""
    original: Any = XTermParser._sequence_to_key_events
    if getattr(original, "_bastion_alt", False):
        return

    def sequence_to_key_events(
        self: XTermParser, sequence: str, alt: bool = False
    ) -> Iterable[events.Key]:
        for event in original(self, sequence, alt):
            if alt and event.key in _ALT_NAMED:
                yield events.Key(f"alt+{event.key}", event.character)
            else:
                yield event

    sequence_to_key_events._bastion_alt = True  # type: ignore[attr-defined]
    XTermParser._sequence_to_key_events = sequence_to_key_events  # type: ignore[method-assign]


def begin_batch(app: App[Any]) -> None:
    """Hold repaints until `end_batch` (what `App.batch_update` does in a `with` block)."""
    app._begin_batch()


def end_batch(app: App[Any]) -> None:
    app._end_batch()


def following_anchor(widget: Widget) -> bool:
    """An anchored widget still follows its end: the user has not scrolled away."""
    return not widget._anchor_released


def anchor_in_layout(widget: Widget) -> None:
    """Anchor `widget` from inside its own layout: the compositor scrolls it to its end
    in the same pass (`Widget.anchor()` would scroll now and draw twice)."""
    widget._anchored = True


class KeysFirst(TextArea):
    """A TextArea that offers each key to `take_key` before its own handling."""

    async def take_key(self, event: events.Key) -> bool:
        """True: the key is handled (and goes no further)."""
        return False

    async def _on_key(self, event: events.Key) -> None:
        if await self.take_key(event):
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)


_TAKES_LAYOUT = "layout" in signature(Widget._size_updated).parameters


class LaidOutOnce(Widget):
    """A widget whose new height at the same width does not ask for another layout."""

    if _TAKES_LAYOUT:

        def _size_updated(
            self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
        ) -> bool:
            before = self.outer_size
            first = before.width == 0 and self.virtual_size.width == 0  # never laid out
            same_width = (
                before.width > 0
                and size.width == before.width
                and virtual_size.width == self.virtual_size.width
                and container_size.width == self.container_size.width
            )
            return super()._size_updated(
                size, virtual_size, container_size, layout and not (same_width or first)
            )


class BarsInItsPass(Widget):
    """A scrolling widget whose scrollbars are repainted in the pass that lays it out."""

    def _size_updated(self, *args: Any, **kwargs: Any) -> bool:
        changed: bool = super()._size_updated(*args, **kwargs)
        bars: set[Widget] = {
            bar
            for bar in (self._vertical_scrollbar, self._horizontal_scrollbar)
            if bar is not None and bar._repaint_required
        }
        if bars and self.is_attached:
            self.screen._compositor.update_widgets(bars)  # (drawn as the pass composes)
            for bar in bars:
                bar._repaint_required = False
        return changed


@functools.cache
def noting_keys(base: type[Driver]) -> type[Driver]:
    """`base` (a Textual driver class), setting its app's `typed_at` as each key or
    paste is read, and reading an Enter typed before the app took the terminal as
    Enter.

    Keys typed while bastion starts wait in the terminal, which (not yet raw) turns
    each Enter into a line feed as it takes it (ICRNL): read later they would be
    Ctrl+J, a new line in the prompt. The bytes already waiting when the app takes
    the terminal (FIONREAD) were typed before: a line feed among them is an Enter.
    (The app also keeps keys typed before its prompt has the focus: `BastionApp`.)"""

    class NotingKeys(base):  # type: ignore[valid-type,misc]
        _typed_ahead = 0  # bytes waiting in the terminal when the app took it

        def start_application_mode(self) -> None:
            self._typed_ahead = waiting_bytes(getattr(self, "fileno", None))
            super().start_application_mode()

        def process_message(self, message: Any) -> None:
            if isinstance(message, (events.Key, events.Paste)):
                self._app.typed_at = time.monotonic()
            if isinstance(message, events.Key) and self._typed_ahead > 0:
                self._typed_ahead -= len((message.character or " ").encode())
                if message.key == "ctrl+j":  # an Enter the terminal turned into \n
                    message = events.Key("enter", "\r")
            super().process_message(message)

    NotingKeys.__name__ = NotingKeys.__qualname__ = f"NotingKeys{base.__name__}"
    return NotingKeys


def waiting_bytes(fileno: int | None) -> int:
    """How many bytes wait to be read on the terminal `fileno` (0 if it is not one)."""
    if fileno is None:
        return 0
    import array
    import fcntl
    import termios

    count = array.array("i", [0])
    try:
        fcntl.ioctl(fileno, termios.FIONREAD, count)
    except OSError:
        return 0
    return count[0]


def write_raw(app: App[Any], text: str) -> None:
    """Write `text` (an escape sequence bastion made) to the terminal, as `App.bell`
    does; nothing in a headless app (tests, `run_test`)."""
    if not app.is_headless and app._driver is not None:
        app._driver.write(text)
