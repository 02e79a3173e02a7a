"""Escaping text for Textual markup.

`textual.markup.escape` leaves `[NAME]` and `[$x]` alone, which Textual then
reads as tags and drops; this escapes every `[`.
"""

from __future__ import annotations

__all__ = ["escape"]


def escape(text: str) -> str:
    """`text` shown as it is inside markup."""
    return text.replace("[", "\\[")
