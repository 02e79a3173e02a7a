"""Escaping text for Textual markup, its control characters made visible.

`textual.markup.escape` leaves `[NAME]` and `[$x]` alone, which Textual then
reads as tags and drops; this escapes every `[`. Everything a widget shows that
came from a repository, a model, a command, a hook or an MCP server is put into
markup through here, so it also shows that text's control characters instead of
sending them to the terminal (`runtime.visible`).
"""

from __future__ import annotations

from runtime import visible

__all__ = ["escape", "visible"]


def escape(text: str, *, lines: bool = True) -> str:
    """`text` shown as it is inside markup: every `[` escaped, every control character
    visible (`lines`: newlines and tabs kept; else shown as `^J` and `^I`)."""
    return visible(text, lines=lines).replace("[", "\\[")
