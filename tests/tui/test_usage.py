"""The status line's figures (tui.usage): summed once per tuple of runs or entries, so
a frame of streamed text does not walk the whole session, and right when they change."""

from __future__ import annotations

from types import MappingProxyType

from msgspec.structs import replace

from runtime.model.llm import Usage
from runtime.model.views import LiveText
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import open_driven
from tui.usage import context_of, totals


async def test_totals_and_the_estimate_follow_the_runs_and_entries_they_are_made_of(tmp_path):
    turns = [ScriptedTurn(text="one", usage=Usage(10, 2)), ScriptedTurn(text="two" * 40)]
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns))
    try:
        item = await harness.submit(conv_id, "first")
        await harness.wait(item.id, conv_id)
        view = await harness.snapshot(conv_id)
        first = totals(view)
        assert (first.input_tokens, first.output_tokens) == (10, 2)
        # Only the live text changed: the same runs, the same sums (not walked again).
        streamed = replace(view, live=MappingProxyType({view.settled[-1].id: LiveText.of("x")}))
        assert totals(streamed) is first
        estimate = context_of(replace(view, runs=()), "")
        assert context_of(replace(streamed, runs=()), "") == estimate
        # Another run: new tuples, new figures.
        item = await harness.submit(conv_id, "second")
        await harness.wait(item.id, conv_id)
        later = await harness.snapshot(conv_id)
        assert totals(later).input_tokens > first.input_tokens
        bigger = context_of(replace(later, runs=()), "")
        assert bigger.used > estimate.used
    finally:
        await harness.close()
