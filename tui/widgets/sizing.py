"""One layout per change: a transcript widget that only grew taller asks for no other.

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
"""

from __future__ import annotations

from inspect import signature

from textual.geometry import Size
from textual.widget import Widget

__all__ = ["LaidOutOnce"]

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
