"""A ProviderError's retry_limit caps the loop's retries for that failure (an empty answer: once)."""

from __future__ import annotations

from runtime.providers.httpbase import empty_response_error
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness


async def run_turns(tmp_path, turns: list[ScriptedTurn]):
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, max_retries=4)
    try:
        conv = await harness.create_conversation(
            str(tmp_path), settings={"model": "s/m", "approval_mode": "ask"}
        )
        await harness.drive(conv.id, interactive=True)
        item = await harness.submit(conv.id, "hi")
        return await harness.wait(item.id, conv.id), provider
    finally:
        await harness.close()


def empty() -> ScriptedTurn:
    return ScriptedTurn(error=empty_response_error("s", "stop"))


async def test_an_empty_answer_is_asked_again_once(tmp_path) -> None:
    run, _ = await run_turns(tmp_path, [empty(), ScriptedTurn(text="words")])
    assert run.state == "completed"


async def test_a_second_empty_answer_fails_the_run_despite_retries_left(tmp_path) -> None:
    run, provider = await run_turns(tmp_path, [empty(), empty(), ScriptedTurn(text="never")])
    assert run.state == "failed"
    assert run.error is not None and run.error["code"] == "empty_response"
    assert run.error["reason"] == "empty answer"
    assert len(provider.requests) == 2
