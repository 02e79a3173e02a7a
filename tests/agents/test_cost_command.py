"""Issue 37 item 1 in the app: `/cost` says what the whole session cost, its subagents
included, and each part (this conversation, each subagent)."""

from __future__ import annotations

from runtime.testing.server import LoopbackServer
from tests.agents.helpers import MODEL, call, open_harness, task
from tests.tui.conftest import SIZE, app_over, run_settled, wait_for
from tests.tui.test_slash import run_command, said

TURNS = [
    {"match": "PARENT", "unless": ["REPORT"], "tool_calls": [call("task", task("CHILD: look"))],
     "usage": {"prompt_tokens": 1000, "completion_tokens": 10}},
    {"match": "CHILD", "text": "REPORT: looked.",
     "usage": {"prompt_tokens": 5000, "completion_tokens": 50}},
    {"match": "PARENT", "repeat": True, "text": "Done.",
     "usage": {"prompt_tokens": 1000, "completion_tokens": 10}},
]  # fmt: skip


async def test_cost_counts_the_subagents_in_the_sessions_total(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with LoopbackServer(TURNS) as server:
        harness = await open_harness(tmp_path, server.base_url)
        conv = await harness.create_conversation(str(work), settings={"model": MODEL})
        await harness.drive(conv.id, approval_mode="full-auto", interactive=True)
        app = app_over(harness, conv.id, first_prompt="PARENT: go")
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(lambda: run_settled(app), pilot)
                await run_command(app, pilot, "/cost")
                await wait_for(lambda: "this session:" in said(app), pilot)
                text = said(app)
        finally:
            await harness.close()
    assert "this session: 7.0k in, 70 out" in text
    assert "this conversation: 2.0k in, 20 out" in text
    assert "subagent " in text and ": 5.0k in, 50 out" in text
    # broken down by run (the parent's one) and by model (one model here)
    assert "run 1: 2.0k in, 20 out" in text
    assert "openai/loopback: 7.0k in, 70 out" in text
