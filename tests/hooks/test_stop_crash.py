"""A Stop hook cut off by a crash (issue 37 item 3): on resume one line says it
started and did not finish; it is not run again (an effect runs at most once), and
the run ends with the answer the hook was judging instead of asking the model again."""

from __future__ import annotations

import pytest

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import alive, open_session
from tests.hooks.test_resume import count, wait_for

pytestmark = pytest.mark.usefixtures("store_kind")


async def test_a_stop_hook_cut_off_by_a_crash_is_reported_once_and_not_run_again(tmp_path):
    hooks = {"Stop": [{"command": "echo $$ > hook.pid; echo stop >> stop.log; sleep 30"}]}
    server = LoopbackServer([{"text": "the answer"}, {"text": "asked again"}])
    async with server:
        a = await open_session(tmp_path, server, hooks)
        item = await a.harness.submit(a.conversation_id, "go")
        await wait_for(a.workspace / "stop.log")
        await a.harness.close()  # bastion stops while the Stop hook runs
        assert not alive(a.workspace / "hook.pid")
        b = await open_session(tmp_path, server, hooks, conversation_id=a.conversation_id)
        try:
            run = await b.harness.wait(item.id, b.conversation_id, poll=0.05)
            notes = await b.notes()
            rows = await b.hook_rows()
            snap = await b.harness.store.snapshot(b.conversation_id)
        finally:
            await b.harness.close()
    assert run.state == "completed"
    assert count(b.workspace / "stop.log") == ["stop"]  # at most once
    assert len(notes) == 1
    assert notes[0].startswith("Stop hook `") and "was cut off when bastion stopped" in notes[0]
    assert [r["state"] for r in rows] == ["started", "interrupted"]
    assert len(server.requests) == 1  # the model was not asked again
    answers = [e for e in snap.entries if e.kind == "assistant"]
    assert [e.text for e in answers] == ["the answer"] and run.result_entry_id == answers[0].id
