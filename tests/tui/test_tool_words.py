"""Tool rows say what happened in words a user scans (`Edited notes.txt  +1 −1`,
`Read notes.txt  (2 lines, 8 B)`, `Refused: …`), not the tool's first line of output
with its sha256 or `REFUSED FORBIDDEN`."""

from __future__ import annotations

import json

from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import run_settled, wait_for
from tui.toolrows import human_size
from tui.widgets import ToolCallLine


def call(n: int, name: str, **args: object) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=(ToolCall(f"c{n}", name, json.dumps(args)),))


async def test_finished_calls_are_said_in_words(harness_process, tmp_path):
    turns = [
        call(1, "write_file", path="notes.txt", content="one\ntwo\n"),
        call(2, "edit_file", path="notes.txt", old_text="two", new_text="three"),
        call(3, "read_file", path="notes.txt"),
        call(4, "read_file", path="../secret.txt"),
        call(5, "list_directory", path="."),
        call(6, "glob", pattern="*.txt"),
        call(7, "search_files", pattern="three"),
        ScriptedTurn(text="Done."),
    ]
    proc = harness_process(turns)
    (proc.work / "other.txt.bak").write_text("x")
    (proc.work / "sub").mkdir()
    (proc.work / "sub" / "deeper.md").write_text("x")
    (tmp_path / "secret.txt").write_text("no")
    app = proc.app(first_prompt="go", approval_mode="full-auto")
    async with app.run_test(size=(120, 60)) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.1)
        rows = [str(row.render()).split("\n")[0] for row in app.query(ToolCallLine)]
    assert rows == [
        "● Created notes.txt  (8 B)  +2",
        "● Edited notes.txt  +1 −1",
        "● Read notes.txt  (2 lines)",
        "● Refused: path contains '..'",
        "● Listed .  (3 entries)",  # notes.txt, other.txt.bak, sub/
        "● Found 1 file for *.txt",
        '● Searched "three"  (1 match)',
    ], rows
    assert not any("sha256" in r or "REFUSED" in r for r in rows)


def test_human_size():
    assert [human_size(n) for n in (14, 2150, 3 * 1024 * 1024)] == ["14 B", "2.1 KB", "3.0 MB"]
