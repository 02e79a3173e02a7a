"""Issue 40: plan mode, enforced by the harness. Only the reading tools and the todo
list run; the model is told it plans; when it has written a plan the app says so,
and `/approve` leaves plan mode and tells the model to carry the plan out."""

from __future__ import annotations

from tests.tui.conftest import SIZE, run_settled, wait_for
from tests.tui.test_slash import run_command, said, status

PLAN = [{"content": "Read the parser", "status": "done"},
        {"content": "Add the flag", "status": "pending"}]  # fmt: skip


async def test_plan_mode_refuses_changes_and_approve_carries_the_plan_out(harness_process):
    write = {"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}
    todo = {"id": "t1", "name": "todo", "arguments": {"todos": PLAN}}
    proc = harness_process([
        {"tool_calls": [write]}, {"tool_calls": [todo]},
        {"text": "Plan: read, then add the flag."}, {"text": "Done it."},
    ])  # fmt: skip
    app = proc.app(approval_mode="plan")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        assert "plan  ·" in status(app)
        await app.send("add a --json flag")
        await wait_for(lambda: run_settled(app), pilot)
        assert not (proc.work / "a.txt").exists()  # the write was refused, never asked
        refused = next(c for c in app.view.tool_calls if c.name == "write_file")
        assert refused.approval == "denied"
        assert "not allowed in plan mode" in str(refused.result)
        system = proc.requests[0].body["messages"][0]["content"]
        assert "Plan mode: the user wants a plan before any change." in system
        await wait_for(lambda: "the plan is ready" in said(app), pilot)
        await run_command(app, pilot, "/approve")
        await wait_for(lambda: len(app.view.runs) == 2 and run_settled(app), pilot)
        assert "plan approved" in said(app) and "ask  ·" in status(app)
    last = proc.requests[-1].body["messages"]
    assert last[-1]["content"].startswith("The plan is approved")
    assert "Plan mode" not in last[0]["content"]
