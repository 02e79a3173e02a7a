"""ScriptedProvider: replays turns in order, records requests, injects errors."""

from __future__ import annotations

import time

import pytest

from runtime.model.llm import (
    Message,
    ModelRequest,
    Provider,
    ProviderError,
    ReasoningChunk,
    StreamEnd,
    StreamItem,
    TextChunk,
    ToolCall,
    ToolCallChunk,
    Usage,
    UsageReport,
)
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn


def request(text: str) -> ModelRequest:
    return ModelRequest("scripted-model", (Message("user", text),))


async def run(provider: Provider, text: str = "q") -> list[StreamItem]:
    return [item async for item in provider.stream(request(text))]


async def test_turns_replay_in_order_and_requests_are_recorded() -> None:
    call = ToolCall("c1", "read_file", '{"path": "a.txt"}')
    provider = ScriptedProvider(
        [
            ScriptedTurn(text="Looking.", tool_calls=(call,), usage=Usage(10, 4)),
            ScriptedTurn(reasoning="hmm", text="Done."),
        ]
    )
    first = await run(provider, "first")
    assert first == [
        TextChunk("Looking."),
        ToolCallChunk(0, "c1", "read_file", '{"path": "a.txt"}'),
        UsageReport(Usage(10, 4)),
        StreamEnd("tool_calls"),
    ]
    second = await run(provider, "second")
    assert second[:2] == [ReasoningChunk("hmm"), TextChunk("Done.")]
    assert second[-1] == StreamEnd("stop")
    assert [r.messages[0].content for r in provider.requests] == ["first", "second"]
    assert provider.remaining == 0


async def test_chunk_size_cuts_every_part() -> None:
    call = ToolCall("c1", "write_file", '{"a": 1}')
    provider = ScriptedProvider([ScriptedTurn(text="abcde", tool_calls=(call,), chunk_size=2)])
    items = await run(provider)
    assert [i.text for i in items if isinstance(i, TextChunk)] == ["ab", "cd", "e"]
    tool = [i for i in items if isinstance(i, ToolCallChunk)]
    assert tool[0] == ToolCallChunk(0, "c1", "write_file", '{"')
    assert all(t.id is None and t.name is None for t in tool[1:])
    assert "".join(t.arguments for t in tool) == '{"a": 1}'


async def test_error_before_any_chunk() -> None:
    error = ProviderError("rate limited", provider="scripted", status=429, retryable=True)
    provider = ScriptedProvider([ScriptedTurn(text="never", error=error), ScriptedTurn(text="ok")])
    with pytest.raises(ProviderError) as caught:
        await run(provider)
    assert caught.value is error
    assert (await run(provider))[0] == TextChunk("ok")


async def test_error_after_some_chunks() -> None:
    error = ProviderError("dropped", provider="scripted", retryable=True)
    provider = ScriptedProvider(
        [ScriptedTurn(text="abcdef", chunk_size=2, error=error, error_after_chunks=2)]
    )
    seen: list[StreamItem] = []
    with pytest.raises(ProviderError):
        async for item in provider.stream(request("q")):
            seen.append(item)
    assert seen == [TextChunk("ab"), TextChunk("cd")]


async def test_exhausted_script() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ProviderError) as caught:
        await run(provider)
    assert caught.value.code == "script_exhausted"
    assert len(provider.requests) == 1


async def test_delay_between_chunks() -> None:
    provider = ScriptedProvider([ScriptedTurn(text="abc", chunk_size=1, delay=0.02)])
    started = time.perf_counter()
    await run(provider)
    assert time.perf_counter() - started >= 0.05


async def test_default_usage_and_close() -> None:
    provider = ScriptedProvider([ScriptedTurn(text="x" * 40)])
    items = await run(provider)
    usage = next(i for i in items if isinstance(i, UsageReport)).usage
    assert usage.output_tokens == 10
    provider.add(ScriptedTurn(text="more"))
    assert provider.remaining == 1
    await provider.aclose()
    assert provider.closed


def test_is_a_provider() -> None:
    provider: Provider = ScriptedProvider()
    assert provider.name == "scripted"
