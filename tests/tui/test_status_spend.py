"""Issue 40: the status line's tokens are the session's whole work: a subagent's spend
counts beside its parent's, asked of the harness once the task call has ended."""

from __future__ import annotations

from tests.agents.helpers import call, task
from tests.tui.conftest import SIZE, wait_for
from tui.usage import count


def status(app) -> str:
    return " ".join(str(app.query_one(s).render()) for s in ("#status-left", "#status-right"))


async def test_the_status_line_counts_what_subagents_spent(harness_process):
    turns = [
        {"match": "PARENT", "unless": ["REPORT"],
         "tool_calls": [call("task", task("CHILD: say what you see"))]},
        {"match": "CHILD", "repeat": True, "text": "REPORT: " + "seen " * 400},
        {"match": "PARENT", "repeat": True, "text": "Done."},
    ]  # fmt: skip
    proc = harness_process(turns)
    app = proc.app(approval_mode="full-auto")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.view is not None, pilot)
        conv_id = app.conversation_id
        item = await app.harness.submit(conv_id, "PARENT: look")  # (through the protocol)
        await app.harness.wait(item.id, conv_id)
        summary = await app.harness.usage(conv_id)
        assert summary.children  # the child spent something
        whole = summary.total.input_tokens + summary.total.output_tokens
        own = whole - sum(c.input_tokens + c.output_tokens for c in summary.children.values())
        assert count(whole) != count(own)
        await wait_for(lambda: f"{count(whole)} tok" in status(app), pilot)
