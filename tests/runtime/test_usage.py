"""Usage with provenance: measured from the wire (cached tokens too), estimated when a
server sends none, failed attempts counted, totals per run, model and conversation,
and cost from the catalog's prices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import Harness
from runtime.model.llm import ProviderError, Usage
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox, open_harness


async def one_run(
    tmp_path: Path, provider: Any, spec: str, prompt: str = "look"
) -> tuple[Harness, str, Any]:
    harness = await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=lambda s: (provider, s.split("/", 1)[1]),
        toolbox_factory=lambda conv: RecordingToolbox(),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=Config(),
    )
    conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
    await harness.drive(conv.id, approval_mode="full-auto")
    item = await harness.submit(conv.id, prompt)
    run = await harness.wait(item.id, conv.id)
    return harness, conv.id, run


CACHED = {
    "prompt_tokens": 1000,
    "completion_tokens": 200,
    "prompt_tokens_details": {"cached_tokens": 600},
}


async def test_measured_openai_usage_with_cached_tokens_and_cost(tmp_path: Path) -> None:
    turns = [
        {"text": "a", "tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}],
         "usage": CACHED},
        {"text": "done", "usage": CACHED},
    ]  # fmt: skip
    async with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        harness, conv_id, run = await one_run(tmp_path, provider, "openai/gpt-4.1")
        try:
            summary = await harness.usage(conv_id)
        finally:
            await harness.close()
    assert run.usage["quality"] == "measured" and run.usage["model"] == "openai/gpt-4.1"
    assert (run.usage["input_tokens"], run.usage["cached_input_tokens"]) == (2000, 1200)
    # gpt-4.1: 2.00 in, 0.50 cached, 8.00 out per million
    expected = 2 * (400 * 2.0 + 600 * 0.5 + 200 * 8.0) / 1_000_000
    assert run.usage["cost"] == pytest.approx(expected)
    assert summary.total.cost == pytest.approx(expected) and summary.total.cost_complete
    assert summary.per_model["openai/gpt-4.1"].output_tokens == 400
    assert summary.per_run[run.id].quality == "measured"
    assert summary.context_tokens == 1200 and summary.context_quality == "measured"


async def test_measured_anthropic_usage_counts_cache_reads(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "cache_read_input_tokens": 90}
    async with LoopbackServer([{"text": "hi", "usage": usage}]) as server:
        provider = AnthropicProvider("anthropic", server.url)
        harness, _, run = await one_run(tmp_path, provider, "anthropic/claude-sonnet-4-5")
        await harness.close()
    assert (run.usage["input_tokens"], run.usage["cached_input_tokens"]) == (100, 90)
    assert run.usage["output_tokens"] == 5 and run.usage["quality"] == "measured"
    assert run.usage["cost"] == pytest.approx((10 * 3.0 + 90 * 0.3 + 5 * 15.0) / 1_000_000)


async def test_usage_is_estimated_when_the_server_sends_none(tmp_path: Path) -> None:
    async with LoopbackServer([{"text": "an answer of a few words", "omit_usage": True}]) as server:
        provider = OpenAIChatProvider("ollama", server.base_url)
        harness, conv_id, run = await one_run(tmp_path, provider, "ollama/llama3.2")
        summary = await harness.usage(conv_id)
        await harness.close()
    assert run.usage["quality"] == "estimated"
    assert run.usage["input_tokens"] > 50 and run.usage["output_tokens"] >= 5
    assert run.usage["cost"] is None  # a local model has no price
    assert summary.total.quality == "estimated" and summary.total.cost is None


def reported_then(error: ProviderError, usage: Usage) -> ScriptedTurn:
    """A turn that reports usage and then fails before its end (a stream cut after usage)."""
    turn = ScriptedTurn(text="partial", usage=usage, error=error)
    return ScriptedTurn(
        text="partial", usage=usage, error=error, error_after_chunks=len(turn.items()) - 1
    )


async def test_failed_attempts_count(tmp_path: Path) -> None:
    cut = ProviderError("cut", provider="scripted", code="connection_lost", retryable=True)
    provider = ScriptedProvider(
        [reported_then(cut, Usage(100, 7)), ScriptedTurn(text="ok", usage=Usage(110, 3))]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id)
    run = await harness.wait((await harness.submit(conv.id, "hi")).id, conv.id)
    await harness.close()
    assert run.state == "completed"
    assert (run.usage["input_tokens"], run.usage["output_tokens"]) == (210, 10)


async def test_a_failed_run_keeps_its_usage(tmp_path: Path) -> None:
    fatal = ProviderError("bad request", provider="scripted", status=400)
    provider = ScriptedProvider([reported_then(fatal, Usage(40, 2))])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id)
    run = await harness.wait((await harness.submit(conv.id, "hi")).id, conv.id)
    summary = await harness.usage(conv.id)
    await harness.close()
    assert run.state == "failed"
    assert (run.usage["input_tokens"], run.usage["output_tokens"]) == (40, 2)
    assert summary.total.input_tokens == 40


async def test_totals_per_run_model_and_conversation(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="one", usage=Usage(1000, 10)),
            ScriptedTurn(text="two", usage=Usage(3000, 30)),
        ]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "openai/gpt-4o"})
    await harness.drive(conv.id)
    first = await harness.wait((await harness.submit(conv.id, "a")).id, conv.id)
    await harness.release(conv.id)
    await harness.drive(conv.id, model="local/mystery-model")
    second = await harness.wait((await harness.submit(conv.id, "b")).id, conv.id)
    summary = await harness.usage(conv.id)
    await harness.close()
    assert summary.total.input_tokens == 4000 and summary.total.output_tokens == 40
    assert set(summary.per_model) == {"openai/gpt-4o", "local/mystery-model"}
    assert summary.per_model["local/mystery-model"].cost is None
    assert summary.per_run[first.id].cost == pytest.approx((1000 * 2.5 + 10 * 10.0) / 1e6)
    assert summary.per_run[second.id].input_tokens == 3000
    assert summary.total.cost == pytest.approx((1000 * 2.5 + 10 * 10.0) / 1e6)
    assert not summary.total.cost_complete  # the mystery model has no price
    assert summary.to_dict()["total"]["quality"] == "measured"


async def test_usage_and_compact_cross_the_protocol(tmp_path: Path) -> None:
    from runtime.ipc.local import local_client

    provider = ScriptedProvider([ScriptedTurn(text="one", usage=Usage(100, 5))])
    inner = await open_harness(tmp_path, provider)
    conv = await inner.create_conversation(str(tmp_path), settings={"model": "s/x"})
    await inner.drive(conv.id)
    harness = await local_client(inner)
    try:
        item = await harness.submit(conv.id, "go")
        await harness.wait(item.id, conv.id)
        summary = await harness.usage(conv.id)
        assert summary.total.input_tokens == 100 and summary.context_tokens == 105
        assert summary == await inner.usage(conv.id)  # the same value after its JSON
        assert await harness.compact(conv.id) is None  # one turn: nothing whole to compact
    finally:
        await harness.close()
