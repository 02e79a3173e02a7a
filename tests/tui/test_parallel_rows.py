"""Reads of one turn running together in the app: each its own row, all running at
once, and the status line counts them."""

from __future__ import annotations

import asyncio
import json

from runtime.model.llm import ToolCall
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.test_parallel_calls import ObservedToolbox
from tests.tui.conftest import SIZE, app_over, open_driven, run_settled, wait_for
from tui.widgets import ToolCallLine


async def test_reads_running_together_each_show_running(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in "abc":
        (ws / f"{name}.txt").write_text(f"{name}\n")
    held = {f"{n}.txt": asyncio.Event() for n in "abc"}
    toolbox = ObservedToolbox(WorkspaceToolbox(str(ws), tmp_path / "artifacts"), hold=held)
    reads = tuple(
        ToolCall(f"c{i}", "read_file", json.dumps({"path": f"{n}.txt"}))
        for i, n in enumerate("abc")
    )
    provider = ScriptedProvider([ScriptedTurn(tool_calls=reads), ScriptedTurn(text="Read.")])
    harness, conv_id = await open_driven(tmp_path, provider, toolbox)
    app = app_over(harness, conv_id, first_prompt="read them")
    try:
        async with app.run_test(size=SIZE) as pilot:

            def rows() -> list[str]:
                return [str(line.render()) for line in app.query(ToolCallLine)]

            await wait_for(lambda: sum("running…" in r for r in rows()) == 3, pilot)
            assert [r.split("running…")[0].split()[1:3] for r in rows()] == [
                ["read_file", "a.txt"], ["read_file", "b.txt"], ["read_file", "c.txt"],
            ]  # fmt: skip
            status = str(app.query_one("#status-left").render())
            assert "running 3 tools (read_file)" in status
            held["b.txt"].set()  # one finishes: its row says so, the others still run
            await wait_for(lambda: sum("running…" in r for r in rows()) == 2, pilot)
            assert "running…" not in rows()[1]
            assert "running 2 tools" in str(app.query_one("#status-left").render())
            held["a.txt"].set()
            held["c.txt"].set()
            await wait_for(lambda: run_settled(app), pilot)
            assert not any("running…" in r for r in rows())
    finally:
        await harness.close()
