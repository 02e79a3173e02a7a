"""Snapshot of plan mode (issue 40): the model tried a write (refused by the harness),
wrote its plan to the todo list and answered; the app says the plan is ready."""

from __future__ import annotations

import json
from typing import Any

from textual.css.query import NoMatches

from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox
from tests.tui.conftest import (
    SIZE,
    SNAPSHOT_ID,
    local_client,
    open_driven,
    screen_settled,
    snapshot_folder,
    wait_for,
)
from tests.tui.test_slash import said
from tui.app import BastionApp

PLAN = [{"content": "Read the parser", "status": "done"},
        {"content": "Add the --json flag", "status": "pending"},
        {"content": "Write its test", "status": "pending"}]  # fmt: skip


def told(app: BastionApp) -> str:
    try:
        return said(app)
    except NoMatches:  # (the line above the prompt is mounted after the first frame)
        return ""


def test_plan_mode_with_a_plan_ready(snap_compare, tmp_path):
    """The prompt "add a --json flag"; a `write_file` row refused (not allowed in plan
    mode); the todo list `plan · 1/3 done` pinned above the prompt; above it "the plan
    is ready: /approve carries it out (leaving plan mode), or say what to change"; the
    status line reads `… · plan · …`."""
    write = ToolCall("w1", "write_file", json.dumps({"path": "cli.py", "content": "x"}))
    todo = ToolCall("t1", "todo", json.dumps({"todos": PLAN}))
    provider = ScriptedProvider([
        ScriptedTurn(tool_calls=(write,)), ScriptedTurn(tool_calls=(todo,)),
        ScriptedTurn(text="Plan: read the parser, add the flag, then test it."),
    ])  # fmt: skip

    async def opener() -> tuple[Any, str]:
        harness, conv_id = await open_driven(
            tmp_path, provider, RecordingToolbox(), approval_mode="plan",
            conversation_id=SNAPSHOT_ID, folder=snapshot_folder(),
        )  # fmt: skip
        return await local_client(harness, client="test"), conv_id

    app = BastionApp(opener=opener, first_prompt="add a --json flag")

    async def planned(pilot: Any) -> None:
        await wait_for(lambda: "the plan is ready" in told(pilot.app), pilot)
        await screen_settled(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=planned)
