"""Issue 34, item 8: `runtime.visible`, the one function every front end shows foreign
text through, and `runtime.visible_json`, the JSON formats' counterpart."""

from __future__ import annotations

import json

from runtime import visible, visible_json


def test_visible_shows_each_kind_of_control_character():
    assert visible("a\x1b[2Kb\x07c\x00d\x7f") == "a^[[2Kb^Gc^@d^?"
    assert visible("csi\x9b2K nel\x85") == "csi\\x9b2K nel\\x85"
    assert visible("a\u202eevil\u202c \u2066x\u2069 \u200f\u061c") == (
        "a\\u202eevil\\u202c \\u2066x\\u2069 \\u200f\\u061c"
    )
    assert visible("name-\udcff-\ud800") == "name-\\xff-\\ud800"  # (surrogateescape: the byte)
    assert visible("one\r\ntwo\tthree\rfour") == "one\ntwo\tthree^Mfour"
    assert visible("one\ntwo\tthree", lines=False) == "one^Jtwo^Ithree"
    assert visible("plain text, ünïcödé, 中文, emoji 🎉") == "plain text, ünïcödé, 中文, emoji 🎉"


def test_visible_json_is_the_same_json_value_and_safe_to_print():
    value = {"t\x9b": ["\x1b]52;c;x\x07", "\u202e", "\udcff", "\x7f", "ok ü"]}
    text = visible_json(value)
    assert json.loads(text) == value
    assert text.isascii() or all(ord(c) >= 0xA0 for c in text if not c.isascii())
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    text.encode("utf-8")  # a lone surrogate would raise here


def test_markup_escape_keeps_a_final_backslash_from_swallowing_the_next_tag():
    """Text ending in a backslash (a path, a continued shell line, an ST) put into markup
    before a tag: the tag still closes (it was a MarkupError that ended the app)."""
    from textual.content import Content

    from tui.markup import escape

    for text, plain in [("C:\\dir\\", "C:\\dir\\"), ("end\x1b\\", "end^[\\"), ("a\\[b]", "a\\[b]")]:
        content = Content.from_markup(f"[b]{escape(text)}[/] after")
        assert content.plain.replace("\u200b", "") == f"{plain} after"


def test_what_rich_and_textual_do_on_their_own():
    """The experiment `runtime.visible` rests on, kept: Rich (and so Textual, which draws
    Rich's segments) drops BEL, BS, VT, FF and CR itself, but passes ESC, the other C0
    characters, DEL, C1 and the bidi controls to the terminal. If a release starts making
    them visible itself, `visible` is doing twice what it need do once."""
    import io

    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    raw = "a\x07b\x08c\x0bd\x0ce\rf|\x1b]52;c;x\x1b\\|\x0e|\x7f|\x9b2K|\u202e|"
    Console(file=out, force_terminal=True, color_system=None, width=200).print(Text(raw))
    shown = out.getvalue()
    assert "abcdef|" in shown  # dropped
    for kept in ("\x1b]52;c;x\x1b\\", "\x0e", "\x7f", "\x9b", "\u202e"):
        assert kept in shown  # passed through


def test_ordinary_text_is_left_alone():
    """What users rely on: lines, tabs, code, every printable script: the same object."""
    for text in ("one\ntwo\n\tindented", "```python\ndef f():\n\treturn 1\n```", "ü 中文 🎉 א"):
        assert visible(text) is text
    assert visible("a\r\nb") == "a\nb"  # (a CRLF line end is a line end)
