"""Streamed Markdown is rendered a block at a time, each block once (`render_aside`,
by `markdown._render_blocks`).

The open segment of a streaming answer is rendered again on every frame; its blocks
but the last are the ones the frame before rendered, so they are kept and only the
last is rendered again. The lines are those of the text rendered whole.
"""

from __future__ import annotations

from rich.theme import Theme

from tui.widgets import markdown
from tui.widgets.rich_markdown import aside_console, render_lines
from tui.widgets.segments import blocks

EVERY_BLOCK = """# Title

Intro with `code`, **bold**, *emphasis* and a [link](https://example.com).

---

| a | b |
|---|---|
| 1 | 2 |

1. one
2. two

- a
- b

Setext heading
==============

    indented code

> a quote
> that goes on

```python
def f(x):
    return x
```

###### small

plain text at the end
"""


THEME = Theme({})  # (one theme: blocks are kept by the theme they were rendered in)


def _both(source: str) -> tuple[list, list]:
    console = aside_console("truecolor")
    options = console.options.update_width(60).update(highlight=False, height=None)
    whole = render_lines(console, options, THEME, source, True)
    return whole, markdown._render_blocks(console, options, THEME, source, True)


def test_a_text_rendered_by_blocks_is_the_text_rendered_whole():
    """Every prefix of a text with each kind of block, as a stream shows it."""
    source = EVERY_BLOCK * 2
    assert len(blocks(source)) > 10
    for end in [*range(1, len(source), 7), len(source)]:
        whole, by_blocks = _both(source[:end])
        assert by_blocks == whole, source[:end]


def test_a_grown_text_renders_only_its_last_block_again():
    source = "## Part one\n\nA paragraph.\n\n```\ncode\n```\n\nThe open "
    _, first = _both(source)
    _, grown = _both(source + "paragraph goes on.")
    settled = len(first) - 1  # the open paragraph's line is the one rendered again
    pairs = list(zip(first[:settled], grown[:settled], strict=True))
    assert all(a is b for a, b in pairs if a)  # (not the blank lines between blocks)
    assert sum(bool(a) for a, _ in pairs) >= 5
    assert grown[settled] is not first[settled]


def test_a_text_with_a_link_reference_or_html_is_rendered_whole():
    """A reference may be defined in another block than its use: not split."""
    assert blocks("See [the docs][d].\n\nMore.\n\n[d]: https://example.com\n") == [
        "See [the docs][d].\n\nMore.\n\n[d]: https://example.com\n"
    ]
    assert len(blocks("<details>\n\nhidden\n\nshown\n")) == 1
    assert blocks("one\n\ntwo\n\nthree") == ["one\n\n", "two\n\n", "three"]


def test_a_line_not_ended_starts_a_block_only_as_a_paragraph():
    """What it becomes is not known yet unless it starts with a letter ("## " may be
    the start of a heading, "1" of a list)."""
    assert blocks("one\n\nThe next") == ["one\n\n", "The next"]
    assert blocks("one\n\n## ") == ["one\n\n## "]
    assert blocks("one\n\n1") == ["one\n\n1"]
    assert blocks("```\nin a fence\n\nStill") == ["```\nin a fence\n\nStill"]
