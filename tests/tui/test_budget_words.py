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
