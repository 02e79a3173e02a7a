"""Issue 38: `bastion attach --plain` on one terminal: an answer ends with its line,
and a status line (stderr) never lands glued to an answer (stdout) mid-line."""

from __future__ import annotations

import io
import json
import sys

import pytest

from runtime import WorkspaceToolbox
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import client_of, open_driven
from tui.attach import AttachLine, Following


async def test_answers_end_their_line_and_notes_start_their_own(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="First answer."), ScriptedTurn(text="Two.")])
    harness, conv_id = await open_driven(tmp_path, provider)
    terminal = io.StringIO()  # stdout and stderr on one terminal
    try:
        item = await harness.submit(conv_id, "one")
        await harness.wait(item.id, conv_id, poll=0.05)
        client = await client_of(harness)
        line = AttachLine(Following(client, conv_id, "live"), terminal, terminal)
        line.render(await harness.snapshot(conv_id))
        assert terminal.getvalue().endswith("First answer.\n")  # the run ended: line ended
        line._write("\nA partial answ")  # an answer streaming in, its line still open
        line.note("queued (follow_up): more")
        assert "A partial answ\nqueued (follow_up): more\n" in terminal.getvalue()
        await client.close()
    finally:
        await harness.close()


async def test_jobs_are_listed_and_stopped_from_the_attached_line(tmp_path):
    """Issue 39: `/jobs` and `/jobs stop N` in `bastion attach --plain`, through the
    client of the process that runs the jobs."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux processes")
    work = tmp_path / "work"
    work.mkdir()
    # A command that keeps running: the job /jobs lists and /jobs stop ends.
    ready = ["python3", "-c", "import time; print('ready', flush=True); time.sleep(60)"]
    arguments = json.dumps({"argv": ready, "background": True})
    provider = ScriptedProvider(
        [
            ScriptedTurn(tool_calls=(ToolCall("c1", "run_command", arguments),)),
            ScriptedTurn(text="up"),
        ]
    )
    toolbox = WorkspaceToolbox(str(work), tmp_path / "artifacts")
    harness, conv_id = await open_driven(tmp_path, provider, toolbox, "full-auto", folder=work)
    out, err = io.StringIO(), io.StringIO()
    try:
        item = await harness.submit(conv_id, "start it")
        await harness.wait(item.id, conv_id, poll=0.05)
        client = await client_of(harness)
        line = AttachLine(Following(client, conv_id, "live"), out, err)
        assert await line.handle("/jobs")
        assert "1 running  python3 -c import time" in err.getvalue()
        assert "| ready" in err.getvalue()
        assert await line.handle("/jobs stop 1")
        assert "job_1 stopped" in err.getvalue()
        assert await line.handle("/jobs stop 1")  # a second stop changes nothing
        assert not (await harness.jobs(conv_id))[0].running
        assert await line.handle("/jobs what")
        assert "usage: /jobs, or /jobs stop N" in err.getvalue()
        await client.close()
    finally:
        await harness.close()


async def test_a_second_terminal_supersedes_sends_urgent_input_and_resets(tmp_path):
    """Issue 37: `bastion attach --plain` reads lines while a run goes (unlike --plain),
    so /urgent and /supersede reach a run from there; /reset when it is idle."""
    import asyncio

    from runtime.model.records import SUPERSEDED, InboxMode
    from tests.runtime.helpers import RecordingToolbox
    from tests.runtime.test_redirect import COMMAND, until
    from tests.tui.conftest import HangingProvider

    turns = [ScriptedTurn(tool_calls=(COMMAND,)), ScriptedTurn(text="urgent done"),
             ScriptedTurn(text="Note: go on.")]  # fmt: skip
    toolbox = RecordingToolbox(gate=asyncio.Event())
    harness, conv_id = await open_driven(
        tmp_path, ScriptedProvider(turns), toolbox, approval_mode="full-auto"
    )
    out, err = io.StringIO(), io.StringIO()
    try:
        client = await client_of(harness)
        line = AttachLine(Following(client, conv_id, "live"), out, err)
        first = await harness.submit(conv_id, "run the tests")
        await until(lambda v: any(c.state == "running" for c in v.tool_calls), harness,
                    conv_id, "the command")  # fmt: skip
        assert await line.handle("/urgent fix prod")
        assert "urgent: the run stops after its current step" in err.getvalue()
        assert toolbox.gate is not None
        toolbox.gate.set()
        [urgent] = [i for i in (await harness.snapshot(conv_id)).inbox if i.text == "fix prod"]
        assert urgent.mode == InboxMode.INTERRUPT_NEXT
        assert (await harness.wait(urgent.id, conv_id)).state == "completed"
        assert (await harness.wait(first.id, conv_id)).state == "interrupted"
        assert await line.handle("/reset")
        assert (
            "reset: a new context starts from the model's handoff note (3 words)" in err.getvalue()
        )
        assert await line.handle("/supersede")
        assert "nothing to supersede" in err.getvalue()
        await client.close()
    finally:
        await harness.close()
    hanging = HangingProvider("half an answer")
    harness, conv_id = await open_driven(tmp_path / "b", hanging)
    try:
        client = await client_of(harness)
        line = AttachLine(Following(client, conv_id, "live"), out, err)
        item = await harness.submit(conv_id, "go")
        await asyncio.wait_for(hanging.streamed.wait(), 30)
        assert await line.handle("/supersede")
        assert (await harness.wait(item.id, conv_id)).reason == SUPERSEDED
        await client.close()
    finally:
        await harness.close()
