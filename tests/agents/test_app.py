"""Subagents in the app: a child's approval asked and answered on the parent's screen,
the child named; a task row opening the child's transcript, live; Esc there
interrupting that child only."""

from __future__ import annotations

from runtime.testing.server import LoopbackServer
from tests.agents.helpers import call, open_harness, start, task
from tests.tui.conftest import SIZE, app_over, run_settled, wait_for
from tui.app import BastionApp
from tui.subagent import SubagentScreen
from tui.widgets import ApprovalPrompt, ToolCallLine
from tui.widgets.transcript import Transcript

WRITER = "---\nname: writer\ndescription: Writes files.\ntools: Read, Write\n---\nYou write.\n"


def rows_with_subagents(app: BastionApp) -> list[ToolCallLine]:
    return [row for row in app.query(ToolCallLine) if row.subagent is not None]


async def test_a_childs_approval_is_answered_on_the_parents_screen(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    folder = tmp_path / "config" / "bastion" / "agents"
    folder.mkdir(parents=True)
    (folder / "writer.md").write_text(WRITER)
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: write x.txt", "make x", agent="writer"))]},
        {"match": "CHILD", "unless": ["x.txt ("],
         "tool_calls": [call("write_file", {"path": "x.txt", "content": "x\n"})]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: written."},
        {"match": "PARENT", "repeat": True, "text": "All done."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        conv, _ = await start(harness, work, "PARENT: go", mode="ask")
        app = app_over(harness, conv.id)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await app.parts_ready.wait()
                prompt = app.query_one(ApprovalPrompt)
                await wait_for(lambda: prompt.has_class("-shown"), pilot)
                assert "subagent writer (make x) asks: Allow write_file x.txt?" in prompt.question
                assert not (work / "x.txt").exists()
                await pilot.press("y")
                await wait_for(lambda: run_settled(app), pilot)
                assert (work / "x.txt").read_text() == "x\n"
                assert not prompt.has_class("-shown")
                (row,) = rows_with_subagents(app)
                assert "REPORT: written." in str(row.render())
                row.focus()
                await pilot.press("enter")  # the row opens the child's transcript
                await wait_for(lambda: isinstance(app.screen, SubagentScreen), pilot)
                screen = app.screen
                await wait_for(lambda: screen.view is not None and screen.view.runs, pilot)
                shown = " ".join(str(w.render()) for w in screen.query("Static"))
                assert "subagent writer (make x)" in shown and "completed" in shown
                assert screen.query_one(Transcript).widget_for(screen.view.entries[-1].id)
                await pilot.press("escape")  # ended: Esc goes back
                await wait_for(lambda: not isinstance(app.screen, SubagentScreen), pilot)
        finally:
            await harness.close()


async def test_the_row_opens_the_childs_live_transcript_and_esc_stops_only_it(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["INTERRUPTED"], "text": "Delegating.",
         "tool_calls": [call("task", task("CHILD: think", "ponder"))]},
        {"match": "CHILD", "repeat": True, "text": "pondering " * 400, "chunk_size": 5,
         "delay_ms": 15},
        {"match": "PARENT", "repeat": True, "text": "The child was stopped."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        conv, _ = await start(harness, work, "PARENT: go")
        app = app_over(harness, conv.id)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await app.parts_ready.wait()
                await wait_for(lambda: bool(rows_with_subagents(app)), pilot)
                (row,) = rows_with_subagents(app)
                await pilot.click(row)
                await wait_for(lambda: isinstance(app.screen, SubagentScreen), pilot)
                screen = app.screen

                def streamed() -> int:
                    view = screen.view
                    texts = [e.text for e in view.entries if e.kind == "assistant"] if view else []
                    return len(texts[-1]) if texts else 0

                await wait_for(lambda: streamed() > 20, pilot)
                first = streamed()
                await wait_for(lambda: streamed() > first + 20, pilot)  # it grows: live
                assert screen.view.active_run is not None
                await pilot.press("escape")  # interrupts the child, not the parent
                await wait_for(lambda: screen.view.active_run is None, pilot)
                assert screen.view.runs[-1].state == "interrupted"
                await pilot.press("enter")
                await wait_for(lambda: not isinstance(app.screen, SubagentScreen), pilot)
                await wait_for(lambda: run_settled(app), pilot)
                assert app.view.runs[-1].state == "completed"  # the parent went on
                results = [e.text for e in app.view.entries if e.kind == "tool_result"]
                assert results[0].startswith("INTERRUPTED: the subagent general ended")
        finally:
            await harness.close()
