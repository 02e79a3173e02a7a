"""Issue 37 item 3: a steer is a prompt too. UserPromptSubmit runs for each steer placed
into a run; a block withdraws that steer alone (the model never sees it) and the run
goes on; a steer the hook lets through reaches the model."""

from __future__ import annotations

import asyncio

from runtime.model.records import InboxMode
from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session, script

TURNS = [
    {"tool_calls": [command("sleep 1; echo slept")]},  # the steers queue while it runs
    {"text": "done"},
]


async def test_a_blocked_steer_is_withdrawn_and_the_run_goes_on(tmp_path):
    guard = script(
        tmp_path / "hooks", "guard.sh",
        'if grep -q "sk-live" ; then echo "a secret key" >&2; exit 2; fi\n',
    )  # fmt: skip
    hooks = {"UserPromptSubmit": [{"command": str(guard)}]}
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, hooks)
        try:
            item = await s.harness.submit(s.conversation_id, "run it")
            for _ in range(500):  # until the command runs (then steers queue behind it)
                snap = await s.harness.snapshot(s.conversation_id)
                if any(c.state == "running" for c in snap.tool_calls):
                    break
                await asyncio.sleep(0.01)  # (poll interval)
            for text in ("use sk-live-999 for it", "and say done"):
                await s.harness.submit(s.conversation_id, text, mode=InboxMode.STEER)
            run = await s.harness.wait(item.id, s.conversation_id, poll=0.05)
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    second = s.sent_text(1)  # the request after the tool round
    assert "and say done" in second and "sk-live" not in second
    assert any("blocked: a secret key" in n for n in notes), notes
