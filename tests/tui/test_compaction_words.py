"""Issue 27 item 13 in `--plain` and the transcript: a compaction is a line while it
works and the summary's line says what it freed (never the summary's own text)."""

from __future__ import annotations

import re

from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.test_compaction import open_with
from tests.runtime.test_compaction_progress import PROMPT, TINY
from tests.tui.conftest import client_of
from tests.tui.test_plain import Keyboard, console
from tui.plain import LineMode
from tui.run_words import summary_label
from tui.widgets.entries import NoteEntry


def test_the_summary_line_says_what_it_freed():
    data = {"compacted": 12, "freed_tokens": 7900, "through": 12}
    entry = Entry("s", "c", 13, EntryKind.SUMMARY, EntryStatus.COMPLETE, "SECRET", 0.0, None, data)
    line = summary_label(entry)
    assert line.startswith("— compacted 12 earlier entries, ~7.9k tokens freed")
    assert "SECRET" not in line
    assert NoteEntry._label(entry) == line  # the app's transcript says the same


async def test_plain_prints_the_compaction_and_what_it_freed(tmp_path):
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(12)])
    summary = ScriptedTurn(text="THE SUMMARY TEXT " * 10)
    harness = await open_with(tmp_path, main, TINY, ScriptedProvider([summary] * 4))
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
        await harness.drive(conv.id, interactive=True)
        con, out = console()
        prompts = [f"prompt {i} {PROMPT}" for i in range(10)]
        assert (
            await LineMode(await client_of(harness), conv.id, con, Keyboard(*prompts)).loop() == 0
        )
        text = out.getvalue()
        assert re.search(r"compacting \d+ entries \(~[\d.]+k tokens\) to fit the window", text)
        assert "(Ctrl+C cancels it" in text
        assert re.search(r"— compacted \d+ earlier entries, ~[\d.]+k tokens freed", text)
        assert "THE SUMMARY TEXT" not in text
    finally:
        await harness.close()
