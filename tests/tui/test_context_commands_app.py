"""Issue 37 items 6 and 10 in the app (over the protocol, as it ships): /supersede while
an answer streams, /urgent while a command runs, /reset after an answer; each says
one line and the store holds what it did."""

from __future__ import annotations

import asyncio

from runtime.model.records import SUPERSEDED, EntryKind, InboxMode
from runtime.run.urgent import URGENT_REASON
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, HangingProvider, open_driven, run_settled, wait_for
from tests.tui.test_redirect_app import command_running
from tests.tui.test_slash import said
from tui.widgets import InboxStrip
from tui.widgets.entries import AssistantEntry


def one_line(app) -> str:
    return " ".join(said(app).split())


async def test_supersede_in_the_app_marks_the_answer_and_says_so(harness_process, tmp_path):
    provider = HangingProvider("I will rewrite everything")
    proc = harness_process(provider)
    app = proc.app(first_prompt="refactor")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await wait_for(lambda: bool(app.view and app.view.active_run), pilot)
        await pilot.press(*"/supersede", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await wait_for(lambda: "superseded:" in one_line(app), pilot)
        assert "left out of the model's context" in one_line(app)
        widget = app.query(AssistantEntry).first()
        await wait_for(lambda: "superseded" in str(widget.query_one(".marker").render()),
                       pilot)  # fmt: skip
        await pilot.press(*"/supersede", "enter")  # nothing runs now: one line, no change
        await wait_for(lambda: "nothing to supersede" in one_line(app), pilot)
    snap = await proc.snapshot()
    assert [(r.state, r.reason) for r in snap.runs] == [("interrupted", SUPERSEDED)]
    assert snap.entries[1].text == "I will rewrite everything"  # kept in the record


async def test_urgent_in_the_app_waits_for_the_command_then_runs_next(harness_process):
    """The command is a real one that runs until the test writes the file it waits for."""
    command = "while [ ! -e done.flag ]; do sleep 0.02; done; echo passed"
    call = {"id": "c1", "name": "run_command", "arguments": {"command": command}}
    proc = harness_process([{"text": "Testing.", "tool_calls": [call]}, {"text": "Fixed."}])
    app = proc.app(first_prompt="run the tests", approval_mode="full-auto")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: command_running(app), pilot)
        await pilot.press(*"/urgent fix prod", "enter")
        await wait_for(lambda: "urgent: the run stops after its current step" in one_line(app),
                       pilot)  # fmt: skip
        await wait_for(lambda: "urgent" in str(app.query_one(InboxStrip).render()), pilot)
        assert command_running(app)  # the command is not cut
        (proc.work / "done.flag").write_text("")
        await wait_for(lambda: bool(app.view and len(app.view.runs) == 2), pilot)
        await wait_for(lambda: run_settled(app), pilot)
    snap = await proc.snapshot()
    [item] = [i for i in snap.inbox if i.text == "fix prod"]
    assert item.mode == InboxMode.INTERRUPT_NEXT and item.state == "placed"
    first, second = snap.runs
    assert first.reason == URGENT_REASON and second.inbox_id == item.id
    assert second.state == "completed"
    [result] = [e.text for e in snap.entries if e.kind == "tool_result"]
    assert "passed" in result  # it ran to its end


async def test_reset_in_the_app_starts_from_the_note_and_says_so(harness_process, tmp_path):
    turns = [ScriptedTurn(text="Answer."), ScriptedTurn(text="Goal: X. Next: Y.")]
    provider = ScriptedProvider(turns)
    proc = harness_process(provider)
    app = proc.app(first_prompt="start")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(app.view and app.view.runs) and run_settled(app), pilot)
        await pilot.press(*"/reset", "enter")
        await wait_for(lambda: "reset: a new context starts" in one_line(app), pilot)
        assert "(4 words)" in one_line(app)
    snap = await proc.snapshot()
    assert [e.kind for e in snap.entries][-1] == EntryKind.RESET
    assert snap.entries[-1].text == "Goal: X. Next: Y."


async def test_ctrl_backslash_in_plain_supersedes_the_run_going(tmp_path):
    """`--plain` takes no typing while a run goes: Ctrl+\\ (SIGQUIT) supersedes it."""
    import os
    import signal

    from runtime.testing.waiting import until
    from tests.tui.conftest import client_of
    from tests.tui.test_plain import Keyboard, console
    from tui.plain import LineMode

    provider = HangingProvider("Rewriting all of it")
    harness, conv_id = await open_driven(tmp_path, provider)
    con, out = console()
    try:
        mode = LineMode(await client_of(harness), conv_id, con, Keyboard("go"))
        task = asyncio.create_task(mode.loop())
        await asyncio.wait_for(provider.streamed.wait(), 30)
        # It follows the run (and so takes the key) once its view has the run.
        await until(lambda: mode.view is not None and mode.view.active_run, "the run followed")
        os.kill(os.getpid(), signal.SIGQUIT)
        assert await asyncio.wait_for(task, 10) == 0
        assert "superseded: the unfinished answer" in " ".join(out.getvalue().split())
        snap = await harness.store.snapshot(conv_id)
        assert (snap.runs[-1].state, snap.runs[-1].reason) == ("interrupted", SUPERSEDED)
    finally:
        await harness.close()
