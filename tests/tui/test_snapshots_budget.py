"""Snapshot of the session's cost cap in the app (issue 40): the session has spent
$0.75 of a $0.50 session budget, and the next prompt stops before its first request."""

from __future__ import annotations

from typing import Any

from runtime import Budget, local_client
from runtime.model.llm import Usage
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import (
    MODEL,
    SIZE,
    SNAPSHOT_ID,
    run_settled,
    snapshot_folder,
    until_still,
    wait_for,
)
from tests.tui.test_slash import said
from tui.app import BastionApp


def capped_app(tmp_path: Any) -> BastionApp:
    spent = Usage(input_tokens=1000, output_tokens=10, cost=0.75)
    provider = ScriptedProvider([ScriptedTurn(text="First answer.", usage=spent)])

    async def opener() -> tuple[Any, str]:
        harness = await open_harness(tmp_path, provider, None, budget=Budget(session_max_cost=0.5))
        conv = await harness.create_conversation(
            str(snapshot_folder()), settings={"model": MODEL}, conversation_id=SNAPSHOT_ID
        )
        await harness.drive(conv.id, interactive=True)
        return await local_client(harness, client="test"), conv.id

    return BastionApp(opener=opener, first_prompt="first question")


def test_the_session_cost_cap_stops_the_next_prompt(snap_compare, tmp_path):
    """`First answer.` above; the second prompt "and another" shown sent; above the
    prompt, in the warning colour, `◼ stopped: the session reached its cost limit
    ($0.7500 of $0.5); raise session_max_cost in your config (or --session-max-cost)
    to go on`; the status line starts `● stopped: session cost limit`."""
    app = capped_app(tmp_path)

    async def second(pilot: Any) -> None:
        await wait_for(lambda: run_settled(pilot.app) and len(pilot.app.view.runs) == 1, pilot)
        await pilot.app.send("and another")
        await wait_for(lambda: "session reached its cost limit" in said(pilot.app), pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=second)
