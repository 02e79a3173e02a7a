"""Escaping text for Textual markup, its control characters made visible.

`textual.markup.escape` leaves `[NAME]` and `[$x]` alone, which Textual then
reads as tags and drops; this escapes every `[`. Everything a widget shows that
came from a repository, a model, a command, a hook or an MCP server is put into
markup through here, so it also shows that text's control characters instead of
sending them to the terminal (`runtime.visible`).

Textual's markup cannot say "a backslash, then a tag": a `[` after a backslash
is never a tag. So text that ends in a backslash (a Windows path, a shell line
continued, the ST that ends an escape sequence) would swallow the tag written
after it (`[/]`: a MarkupError, which ends the app). Such text gets a zero-width
space after its last backslash: nothing changes on screen, and the tag stays one.
"""

from __future__ import annotations

from runtime import visible

__all__ = ["escape", "visible"]

_TAG_GUARD = "\u200b"  # after a final backslash (see above)


def escape(text: str, *, lines: bool = True) -> str:
    """`text` shown as it is inside markup: every `[` escaped, every control character
    visible (`lines`: newlines and tabs kept; else shown as `^J` and `^I`)."""
    shown = visible(text, lines=lines).replace("[", "\\[")
    return shown + _TAG_GUARD if shown.endswith("\\") else shown
