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
