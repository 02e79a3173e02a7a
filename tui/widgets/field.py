"""A status bar field and the fitting of fields into a width (the least important
go first); shared by the bar (tui.widgets.status) and what fills it
(tui.widgets.status_fields), so neither imports the other for it."""

from __future__ import annotations

from functools import lru_cache

import msgspec
from textual.content import Content

__all__ = ["Field", "fit"]


class Field(msgspec.Struct, frozen=True):
    priority: int  # lower stays longer
    markup: str

    @property
    def width(self) -> int:
        return _cells(self.markup)


@lru_cache(maxsize=256)
def _cells(markup: str) -> int:
    return Content.from_markup(markup).cell_length


def fit(fields: list[Field], width: int, gap: int) -> list[Field]:
    """`fields` in their order, without the least important ones that do not fit."""
    kept = list(fields)
    used = sum(f.width for f in kept) + gap * (len(kept) - 1)
    while len(kept) > 1 and used > width:
        dropped = max(kept, key=lambda f: f.priority)
        kept.remove(dropped)
        used -= dropped.width + gap
    return kept
