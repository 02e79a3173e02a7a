"""Silent and empty streams, for both wire formats, against the loopback server.

The watchdog's idle time is short here (3 s: long enough that a loaded machine's
stall before or between two chunks does not trip it) while httpx's own timeouts are long
(30 s), so a test that passes quickly shows the watchdog fired, not httpx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime import Harness
from runtime.model.llm import (
    Message,
    ModelRequest,
    ProviderError,
    StreamEnd,
    StreamItem,
    TextChunk,
    ToolCallChunk,
)
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.httpbase import DEFAULT_IDLE_TIMEOUT, stream_timeout
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.server import LoopbackServer

HELLO = ModelRequest("loopback-model", (Message("user", "hello"),))
IDLE = 3.0
LONG = httpx.Timeout(30.0)
WIRES = ["openai", "anthropic"]

Provider = OpenAIChatProvider | AnthropicProvider


def make(wire: str, server: LoopbackServer, **kwargs: Any) -> Provider:
    kwargs.setdefault("idle_timeout", IDLE)
    kwargs.setdefault("timeout", LONG)
    if wire == "openai":
        return OpenAIChatProvider("openai", server.base_url, **kwargs)
    return AnthropicProvider("anthropic", server.url, **kwargs)


async def stream(
    wire: str, turns: list[dict[str, Any]], *, pause: float = 0.0, **kwargs: Any
) -> tuple[list[StreamItem], ProviderError | None, float]:
    """(items seen, the error if one was raised, seconds taken); `pause` after the first item."""
    items: list[StreamItem] = []
    async with LoopbackServer(turns) as server:
        provider = make(wire, server, **kwargs)
        started = time.monotonic()
        try:
            async for item in provider.stream(HELLO):
                items.append(item)
                if pause and len(items) == 1:
                    await asyncio.sleep(pause)  # (the thing under test: a reader stalled)
        except ProviderError as exc:
            return items, exc, time.monotonic() - started
        finally:
            await provider.aclose()
    return items, None, time.monotonic() - started


def text(items: list[StreamItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextChunk))


# --- silence ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_that_goes_silent_is_dropped_after_the_idle_time(wire: str) -> None:
    turn = {"text": "abcdefghij" * 4, "chunk_size": 5, "fault": {"hang_after_chunks": 3}}
    items, error, took = await stream(wire, [turn])
    assert error is not None, "a silent stream must not wait for httpx's 30 s"
    assert (error.code, error.retryable, error.status) == ("idle_timeout", True, None)
    assert error.is_idle_timeout()
    assert error.reason == "no data for 3 s"
    assert "no data from" in error.message and "3 s" in error.message
    assert error.to_dict()["reason"] == "no data for 3 s"
    assert text(items) == "abcdefghijabcde"  # what came before the silence was delivered
    assert IDLE <= took < 25  # an outer bound: httpx alone would wait 30 s


@pytest.mark.parametrize("wire", WIRES)
async def test_waiting_for_the_response_headers_is_watched_too(wire: str) -> None:
    turn = {"text": "late", "fault": {"delay_first_byte_ms": 15_000}}
    items, error, _ = await stream(wire, [turn])
    assert error is not None and error.code == "idle_timeout" and error.retryable
    assert items == []  # dropped at the idle time: unwatched, "late" came after 15 s


@pytest.mark.parametrize("wire", WIRES)
async def test_a_slow_steady_stream_is_not_silent(wire: str) -> None:
    """0.1 s between chunks for 7 s in all, watched at 3 s: only a gap counts, not the total
    (each piece of model data renews the time, as keep-alives alone do not)."""
    answer = "0123456789" * 21
    turn = {"text": answer, "chunk_size": 3, "delay_ms": 100}
    items, error, took = await stream(wire, [turn], idle_timeout=3.0)
    assert error is None
    assert text(items) == answer and took > 2 * 3.0


@pytest.mark.parametrize("wire", WIRES)
async def test_time_spent_by_the_consumer_between_reads_is_not_silence(wire: str) -> None:
    turn = {"text": "abc", "chunk_size": 1, "delay_ms": 20}
    items, error, _ = await stream(wire, [turn], pause=2 * IDLE)
    assert error is None and text(items) == "abc"


async def test_a_transport_without_timeouts_is_watched_as_well() -> None:
    """The watchdog does not rely on httpx's timeouts: a body that never ends is cut."""

    class Silent(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
            await asyncio.sleep(3600)  # (the thing under test: a body that never ends)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Silent())

    provider = OpenAIChatProvider(
        "mock", "http://mock.invalid/v1", idle_timeout=IDLE, transport=httpx.MockTransport(handler)
    )
    seen: list[StreamItem] = []
    try:
        with pytest.raises(ProviderError) as caught:
            async for item in provider.stream(HELLO):
                seen.append(item)
    finally:
        await provider.aclose()
    assert caught.value.code == "idle_timeout" and seen == [TextChunk("hi")]


def test_httpx_timeouts_follow_the_idle_time() -> None:
    default = stream_timeout(DEFAULT_IDLE_TIMEOUT)
    assert DEFAULT_IDLE_TIMEOUT == 90.0
    assert (default.connect, default.read, default.write, default.pool) == (15.0, 91.0, 60.0, 15.0)
    short = stream_timeout(5.0)
    assert (short.connect, short.read, short.write, short.pool) == (5.0, 6.0, 5.0, 5.0)


# --- empty answers ---------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_with_no_content_is_an_error(wire: str) -> None:
    items, error, _ = await stream(wire, [{"text": ""}])
    assert error is not None, items
    assert (error.code, error.retryable, error.retry_limit) == ("empty_response", True, 1)
    assert error.is_empty_response() and error.reason == "empty answer"
    assert "sent an empty answer (no text and no tool call" in error.message
    assert not any(isinstance(i, StreamEnd) for i in items)


@pytest.mark.parametrize("wire", WIRES)
async def test_reasoning_alone_is_not_an_answer(wire: str) -> None:
    _, error, _ = await stream(wire, [{"reasoning": "thinking hard", "text": ""}])
    assert error is not None and error.code == "empty_response" and error.retryable


@pytest.mark.parametrize("wire", WIRES)
async def test_an_empty_answer_cut_by_the_output_limit_is_not_retried(wire: str) -> None:
    turn = {"reasoning": "a very long thought", "finish_reason": "length"}
    _, error, _ = await stream(wire, [turn])
    assert error is not None and error.code == "empty_response"
    assert not error.retryable and "output limit" in error.message


@pytest.mark.parametrize("wire", WIRES)
async def test_a_tool_call_without_text_is_an_answer(wire: str) -> None:
    turn = {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a"}}]}
    items, error, _ = await stream(wire, [turn])
    assert error is None
    assert any(isinstance(i, ToolCallChunk) and i.name == "read_file" for i in items)


async def test_a_whole_json_answer_with_no_content_is_an_error_too() -> None:
    body = b'{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}'

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    provider = OpenAIChatProvider(
        "mock", "http://mock.invalid/v1", transport=httpx.MockTransport(handler)
    )
    try:
        with pytest.raises(ProviderError) as caught:
            _ = [item async for item in provider.stream(HELLO)]
    finally:
        await provider.aclose()
    assert caught.value.code == "empty_response"


# --- reasons ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        (429, "rate_limit_exceeded", "rate limited"),
        (429, None, "rate limited"),
        (503, None, "server error (HTTP 503)"),
        (None, "connection_lost", "connection lost"),
        (None, "incomplete_stream", "stream ended early"),
        (None, "something_new", "something new"),
        (None, None, "provider error"),
    ],
)
def test_every_provider_error_has_a_short_reason(
    status: int | None, code: str | None, reason: str
) -> None:
    assert ProviderError("long message", provider="p", status=status, code=code).reason == reason


# --- keep-alives are not progress (issue 25, item 2) ----------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_keepalive_only_stream_is_dropped_after_the_idle_time(wire: str) -> None:
    """A server that sends keep-alives every 50 ms (`: ping` comments; Anthropic `ping`
    events) and nothing else is as good as silent: it used to hold the stream forever."""
    turn = {
        "text": "abcdefghij" * 4,
        "chunk_size": 5,
        "fault": {"ping_after_chunks": 2, "ping_interval_ms": 50},
    }
    items, error, took = await stream(wire, [turn])
    assert error is not None, "keep-alives alone must not keep a stream alive"
    assert (error.code, error.retryable) == ("idle_timeout", True)
    assert text(items) == "abcdefghij"  # what came before the keep-alives was delivered
    assert IDLE <= took < 30  # an outer bound: keep-alives that count would hold it for ever


async def test_keepalive_only_stream_run_is_retried_then_fails_with_one_line(
    tmp_path: Path,
) -> None:
    """Through the model loop: each attempt is dropped, retried, and the run fails
    with the watchdog's line once the retries are spent."""
    pings = {"text": "half", "chunk_size": 2, "fault": {"ping_after_chunks": 1}}
    async with LoopbackServer([pings, pings, pings]) as server:
        # (every attempt goes silent by design: a shorter idle time cannot cut an answer)
        provider = make("openai", server, idle_timeout=1.5)
        harness = await Harness.open(
            tmp_path / "b.sqlite",
            resolve_model=lambda s: (provider, s.split("/", 1)[1]),
            loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01, max_retries=2),
            config=Config(),
        )
        started = time.monotonic()
        try:
            conv = await harness.create_conversation(str(tmp_path), settings={"model": "openai/m"})
            await harness.drive(conv.id, approval_mode="full-auto")
            item = await harness.submit(conv.id, "hi")
            run = await asyncio.wait_for(harness.wait(item.id, conv.id, poll=0.05), 60)
        finally:
            await harness.close()
            await provider.aclose()
        took = time.monotonic() - started
        requests = len(server.requests)
    assert run.state == "failed" and requests == 3  # the first try and two retries
    assert run.error is not None and run.error.get("code") == "idle_timeout", run.error
    assert "no data from openai for 1.5 s" in run.error["message"]
    assert "\n" not in run.error["message"]
    assert took < 28  # an outer bound: three idle times and two backoffs, not httpx's 30 s
