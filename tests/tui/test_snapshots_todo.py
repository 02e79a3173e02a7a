"""Snapshot of the model's todo list pinned above the prompt (tui.widgets.todo), at
80x24 and 140x45. Update with `--snapshot-update` and look at every SVG."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import textual

from runtime.model.llm import ModelRequest, StreamItem, TextChunk, ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox
from tests.tui.conftest import make_app, wait_for
from tests.tui.test_snapshots import SNAPSHOT_TEXTUAL
from tui.widgets import AssistantEntry

SIZES = pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
PLAN = [
    {"content": "Read the option parser", "status": "done"},
    {"content": "Add the --json flag to `sessions`", "status": "in_progress"},
    {"content": "Write a test for the JSON output", "status": "pending"},
    {"content": "Say what changed in the README", "status": "pending"},
]


class PlanThenWork(ScriptedProvider):
    """Answers the first request with a `todo` call, then streams `text` and waits."""

    def __init__(self, text: str) -> None:
        call = ToolCall("t1", "todo", json.dumps({"todos": PLAN}))
        super().__init__([ScriptedTurn(text="First, a plan.", tool_calls=(call,))])
        self.text = text
        self.working = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        if not self.requests:
            async for item in super().stream(request):
                yield item
            return
        self.requests.append(request)
        yield TextChunk(self.text)
        self.working.set()
        await asyncio.Event().wait()


@pytest.fixture(autouse=True)
def _same_textual() -> None:
    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(f"snapshots were made with textual {SNAPSHOT_TEXTUAL}")


@SIZES
def test_the_todo_list_is_pinned_above_the_prompt(snap_compare, tmp_path, size):
    """A run going on ("Add a --json flag to sessions"): the transcript shows "First, a
    plan.", the call row `todo 1/4 done · Add the --json flag to `sessions`` with its
    result `Todo list saved (1/4 done):`, and "Now the flag itself.". Pinned right above the prompt:
    `plan · 1/4 done`, then `✓ Read the option parser` (muted, struck through),
    `▸ Add the --json flag to `sessions`` (bold, accent), `○ Write a test for the JSON
    output` and `○ Say what changed in the README`. The status line says the run is
    writing."""
    provider = PlanThenWork("Now the flag itself.")
    app = make_app(
        tmp_path, provider, toolbox=RecordingToolbox(), first_prompt="Add a --json flag to sessions"
    )

    async def planned(pilot: Any) -> None:
        await wait_for(provider.working.is_set, pilot)
        await wait_for(lambda: len(list(pilot.app.query(AssistantEntry))) == 2, pilot)
        await wait_for(lambda: bool(pilot.app.view and pilot.app.view.todos), pilot)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=planned)
