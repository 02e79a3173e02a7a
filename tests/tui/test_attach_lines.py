"""Issue 38: `bastion attach --plain` on one terminal: an answer ends with its line,
and a status line (stderr) never lands glued to an answer (stdout) mid-line."""

from __future__ import annotations

import io

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
