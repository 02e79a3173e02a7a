"""A finished command keeps its output's tail in its row, with exit code and duration,
expandable to all of it (bounded); the row is drawn from the view, so a reopened
session shows the same."""

from __future__ import annotations

import json

from runtime.model.llm import ToolCall
from runtime.model.records import ToolCallRecord
from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import SIZE, run_settled, wait_for
from tui.app import BastionApp
from tui.widgets import ToolCallLine
from tui.widgets.command_output import MAX_CHARS, MAX_LINES, TAIL_LINES, CommandOutput, duration

SCRIPT = 'for i in $(seq 1 25); do echo "line $i"; done; echo "bad \\\\"; exit 3'


def row_text(app: BastionApp) -> str:
    rows = list(app.query(ToolCallLine))
    return str(rows[-1].render()) if rows else ""


def command_turns(script: str) -> list[ScriptedTurn]:
    call = ToolCall("call_1", "run_command", json.dumps({"command": script}))
    return [ScriptedTurn(tool_calls=(call,)), ScriptedTurn(text="It failed.")]


async def test_a_finished_command_keeps_its_tail_exit_code_and_duration(harness_process):
    proc = harness_process(command_turns(SCRIPT))
    app = proc.app(first_prompt="run it", approval_mode="full-auto")
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        record = app.view.tool_calls[0]
        ms = record.result["data"]["duration_ms"]
        lines = row_text(app).split("\n")
        assert lines[0].startswith("● Ran for i in")  # the call in words
        assert lines[1] == f"  └ exit 3  ·  {duration(ms)}  ·  26 lines"
        # the last TAIL_LINES lines, verbatim (a trailing backslash is text, not markup)
        assert [x.strip() for x in lines[2:-1]] == [
            *(f"line {i}" for i in range(17, 26)),
            "bad \\",
        ]
        assert lines[-1].strip() == "ctrl+o or click: all 26 lines"
        row = app.query_one(ToolCallLine)
        assert row.outer_size.height == 2 + TAIL_LINES + 1

        await pilot.press("ctrl+o")  # the whole output
        await pilot.pause(0.05)
        expanded = row_text(app).split("\n")
        assert row.has_class("-expanded")
        assert [x.strip() for x in expanded[2:-1]] == [
            *(f"line {i}" for i in range(1, 26)),
            "bad \\",
        ]
        assert expanded[-1].strip() == "ctrl+o or click: last 10 lines"

        await pilot.click(ToolCallLine)  # and back
        await pilot.pause(0.05)
        assert not row.has_class("-expanded") and row_text(app).split("\n") == lines


async def test_a_reopened_session_shows_the_same_row(harness_process):
    proc = harness_process(command_turns(SCRIPT))
    app = proc.app(first_prompt="run it", approval_mode="full-auto")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        live = row_text(app)
    reopened = proc.app(resume=app.conversation_id)  # `bastion -r ID`: a new harness process
    async with reopened.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(row_text(reopened)), pilot)
        await pilot.pause(0.05)
        assert "exit 3" in live and "line 25" in live
        assert row_text(reopened) == live


def _record(data: dict[str, object], name: str = "run_command") -> ToolCallRecord:
    return ToolCallRecord(
        "k", "c", "r", "e", 0, name, "{}", False, "none", "done", 0.0, 0.0,
        result={"tool": name, "ok": True, "data": data},
    )  # fmt: skip


def test_only_a_finished_command_with_output_has_a_tail():
    assert CommandOutput.of(None) is None
    assert CommandOutput.of(_record({"output": "x"}, name="read_file")) is None
    assert CommandOutput.of(_record({"refusal": {"code": "INTERRUPTED"}})) is None
    quiet = CommandOutput.of(_record({"output": "", "exit_code": 0, "duration_ms": 5}))
    assert quiet is not None and quiet.status().endswith("no output") and not quiet.expandable


def test_how_a_command_ended():
    def status(**data: object) -> str:
        found = CommandOutput.of(_record({"output": "x\n", **data}))
        assert found is not None
        return found.status()

    assert status(exit_code=0, duration_ms=1200).startswith("[$success]exit 0[/]")
    assert "1.2 s" in status(exit_code=0, duration_ms=1200)
    assert "2 m 05 s" in status(exit_code=0, duration_ms=125_000)
    assert status(exit_code=-9, signal=9).startswith("[$error]killed by signal 9[/]")
    assert status(exit_code=None, timed_out=True).startswith("[$warning]timed out[/]")
    assert status(exit_code=1).startswith("[$error]exit 1[/]")


def test_the_expanded_output_is_bounded_with_a_note():
    many = "\n".join(f"l{i}" for i in range(MAX_LINES + 500))
    found = CommandOutput.of(_record({"output": many, "exit_code": 0}))
    assert found is not None
    assert len(found.lines) == MAX_LINES and found.lines[-1] == f"l{MAX_LINES + 499}"
    assert found.omitted == 500 and f"{MAX_LINES + 500:,} lines" in found.status()
    shown = found.content(expanded=True).plain.split("\n")
    assert shown[1].strip() == (
        f"… 500 earlier lines not shown (a row keeps the last {MAX_LINES:,} lines and 256 KiB)"
    )
    assert len(shown) == 1 + 1 + MAX_LINES + 1
    assert "earlier lines" not in found.content(expanded=False).plain

    wide = "\n".join("x" * 1000 for _ in range(400))  # 400 KB in 400 lines
    cut = CommandOutput.of(_record({"output": wide, "exit_code": 0}))
    assert cut is not None and sum(len(line) + 1 for line in cut.lines) <= MAX_CHARS
    assert cut.omitted + len(cut.lines) == 400 and cut.omitted > 0
    assert all(line == "x" * 1000 for line in cut.lines)  # whole lines only


def test_colours_are_dropped_and_other_escapes_shown_not_obeyed():
    """Colours go (their text stays); anything else that would act on the terminal (a
    bell, a clipboard write, a title) is shown as text (issue 34, item 8)."""
    output = "\x1b[31mred\x1b[0m\tok\r\n\x07done \x1b]52;c;UFdORUQ=\x07 \x1b]2;t\x1b\\"
    found = CommandOutput.of(_record({"output": output, "exit_code": 0}))
    assert found is not None
    assert found.lines == ("red ok", "^Gdone ^[]52;c;UFdORUQ=^G ^[]2;t^[\\")
