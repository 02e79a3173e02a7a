"""Issue 27 item 15 beyond print mode: a run its budget stopped says which limit, in
`--plain` (a line at the run's end) and in the app's status line (`stopped: turn limit`)."""

from __future__ import annotations

import json

from runtime import Budget
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tests.tui.conftest import MODEL, client_of
from tests.tui.test_plain import Keyboard, console
from tui.plain import LineMode
from tui.widgets.status_fields import run_state_label


async def test_plain_and_the_status_line_name_the_limit(tmp_path):
    listing = ScriptedTurn(tool_calls=(ToolCall("c1", "list_directory", json.dumps({})),))
    provider = ScriptedProvider([listing, ScriptedTurn(text="never sent")])
    harness = await open_harness(tmp_path, provider, RecordingToolbox(), budget=Budget(max_turns=1))
    try:
        conv = await harness.create_conversation(
            str(tmp_path), settings={"model": MODEL, "approval_mode": "full-auto"}
        )
        await harness.drive(conv.id, interactive=True)
        con, out = console()
        assert await LineMode(await client_of(harness), conv.id, con, Keyboard("look")).loop() == 0
        assert "◼ stopped: the run reached its turn limit (1)" in out.getvalue()
        assert len(provider.requests) == 1
        view = await harness.snapshot(conv.id)
        assert "stopped: turn limit" in run_state_label(view)
    finally:
        await harness.close()


def said_in(app) -> str:
    from tests.tui.test_slash import said

    return " ".join(said(app).split())


async def test_the_session_cap_says_why_in_plain_and_in_the_app(harness_process):
    """A session over its cap: the next prompt stops before its first request, and
    each front end says so in one line (the app above the prompt, as no answer is
    there to mark, and in its status line). The cap is the user's config's; both
    front ends are clients of harness processes started as `bastion` starts them."""
    from tests.tui.conftest import SIZE, wait_for

    usage = {"prompt_tokens": 1000, "completion_tokens": 10, "cost": 0.75}
    proc = harness_process([{"text": "First.", "usage": usage}])
    config = proc.tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("session_max_cost = 0.5\n")
    owner, conv_id = await proc.driving(None)
    try:
        con, out = console()
        keyboard = Keyboard("one", "two")
        assert await LineMode(owner, conv_id, con, keyboard).loop() == 0
    finally:
        await owner.close()
    said = " ".join(out.getvalue().split())  # (the console wraps at its width)
    assert said.count("◼ stopped: the session reached its cost limit ($0.7500 of $0.5); "
                      "raise session_max_cost in your config (or --session-max-cost) to go on") == 1  # fmt: skip
    assert len(proc.requests) == 1
    app = proc.app(resume=conv_id)  # `bastion -r ID`: the app over a new harness process
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        runs = len(app.view.runs)
        await pilot.press(*"three", "enter")
        await wait_for(lambda: len(app.view.runs) > runs and app.view.runs[-1].terminal, pilot)
        await wait_for(lambda: "session reached its cost limit" in said_in(app), pilot)
        state = lambda: str(app.query_one("#status-left").render())  # noqa: E731
        await wait_for(lambda: "stopped: session cost limit" in state(), pilot)
    assert len(proc.requests) == 1


async def test_the_status_line_says_a_summary_left_writing_goes_on(tmp_path):
    """A run answered while its background summary was still written: the summary goes
    on (runtime.run.compacting.detach) and the status line says so beside "done"; once
    it is done, "done" alone."""
    from runtime.model.events import CompactionProgress
    from runtime.model.views import reduce

    harness = await open_harness(
        tmp_path, ScriptedProvider([ScriptedTurn(text="Done.")]), RecordingToolbox()
    )
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": MODEL})
        await harness.drive(conv.id)
        item = await harness.submit(conv.id, "go")
        run = await harness.wait(item.id, conv.id)
        view = await harness.snapshot(conv.id)
    finally:
        await harness.close()

    def progress(phase: str, seq: int) -> CompactionProgress:
        return CompactionProgress(
            conv.id, run.id, 1, seq, phase, entries=12, tokens=3000, background=True
        )

    writing = reduce(view, progress("writing", 1))
    assert "● done · compacting" in run_state_label(writing)
    assert "in the background" in run_state_label(writing)
    assert run_state_label(reduce(writing, progress("done", 2))).endswith("● done[/]")
