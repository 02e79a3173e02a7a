"""Issue 40: plan mode, enforced by the harness. Only the reading tools and the todo
list run; the model is told it plans; when it has written a plan the app says so,
and `/approve` leaves plan mode and tells the model to carry the plan out."""

from __future__ import annotations

import json

from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, app_over, open_driven, run_settled, wait_for
from tests.tui.test_slash import run_command, said, status

PLAN = [{"content": "Read the parser", "status": "done"},
        {"content": "Add the flag", "status": "pending"}]  # fmt: skip


async def test_plan_mode_refuses_changes_and_approve_carries_the_plan_out(tmp_path, toolbox):
    write = ToolCall("w1", "write_file", json.dumps({"path": "a.txt", "content": "x"}))
    todo = ToolCall("t1", "todo", json.dumps({"todos": PLAN}))
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(write,)), ScriptedTurn(tool_calls=(todo,)),
        ScriptedTurn(text="Plan: read, then add the flag."), ScriptedTurn(text="Done it."),
    ])  # fmt: skip
    harness, conv_id = await open_driven(tmp_path, provider, toolbox, approval_mode="plan")
    app = app_over(harness, conv_id)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(app.ready.is_set, pilot)
            assert "plan  ·" in status(app)
            await app.send("add a --json flag")
            await wait_for(lambda: run_settled(app), pilot)
            assert toolbox.calls == []  # the write was refused, never asked
            refused = next(c for c in app.view.tool_calls if c.name == "write_file")
            assert refused.approval == "denied"
            assert "not allowed in plan mode" in str(refused.result)
            system = provider.requests[0].messages[0].content
            assert "Plan mode: the user wants a plan before any change." in system
            await wait_for(lambda: "the plan is ready" in said(app), pilot)
            await run_command(app, pilot, "/approve")
            await wait_for(lambda: len(app.view.runs) == 2 and run_settled(app), pilot)
            assert "plan approved" in said(app) and "ask  ·" in status(app)
            last = provider.requests[-1]
            assert last.messages[-1].content.startswith("The plan is approved")
            assert "Plan mode" not in last.messages[0].content
    finally:
        await harness.close()
