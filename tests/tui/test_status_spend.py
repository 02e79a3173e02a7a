"""Issue 40: the status line's tokens are the session's whole work: a subagent's spend
counts beside its parent's, asked of the harness once the task call has ended."""

from __future__ import annotations

from runtime.testing.server import LoopbackServer
from tests.agents.helpers import MODEL, call, open_harness, task
from tests.tui.conftest import SIZE, app_over, wait_for
from tui.usage import count


def status(app) -> str:
    return " ".join(str(app.query_one(s).render()) for s in ("#status-left", "#status-right"))


async def test_the_status_line_counts_what_subagents_spent(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    turns = [
        {"match": "PARENT", "unless": ["REPORT"],
         "tool_calls": [call("task", task("CHILD: say what you see"))]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: " + "seen " * 400},
        {"match": "PARENT", "repeat": True, "text": "Done."},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        harness = await open_harness(tmp_path, server.base_url)
        try:
            conv = await harness.create_conversation(str(work), settings={"model": MODEL})
            await harness.drive(conv.id, approval_mode="full-auto")
            app = app_over(harness, conv.id)
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(lambda: app.view is not None, pilot)
                item = await harness.submit(conv.id, "PARENT: look")
                await harness.wait(item.id, conv.id)
                summary = await harness.usage(conv.id)
                assert summary.children  # the child spent something
                whole = summary.total.input_tokens + summary.total.output_tokens
                own = whole - sum(
                    c.input_tokens + c.output_tokens for c in summary.children.values()
                )
                assert count(whole) != count(own)
                await wait_for(lambda: f"{count(whole)} tok" in status(app), pilot)
        finally:
            await harness.close()
