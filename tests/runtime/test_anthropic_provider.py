"""AnthropicProvider: Messages API request shape, stream events, errors (httpx.MockTransport)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from runtime.model.llm import (
    ImagePart,
    Message,
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    StreamEnd,
    StreamItem,
    TextChunk,
    TextPart,
    ToolCall,
    ToolCallChunk,
    ToolSpec,
    Usage,
    UsageReport,
)
from runtime.providers.anthropic import AnthropicProvider, build_messages_body, default_max_tokens
from runtime.testing.server import LoopbackServer

KEY = "sk-ant-test-0123456789abcdefghijkl"
HELLO = ModelRequest("claude-sonnet-4", (Message("user", "hello"),))


def event(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def block_delta(index: int, **delta: Any) -> bytes:
    return event("content_block_delta", index=index, delta=delta)


STREAM = b"".join(
    [
        event(
            "message_start",
            message={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-sonnet-4",
                "stop_reason": None,
                "usage": {
                    "input_tokens": 25,
                    "cache_creation_input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "output_tokens": 1,
                },
            },
        ),
        event("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        block_delta(0, type="thinking_delta", thinking="Let me "),
        block_delta(0, type="thinking_delta", thinking="think\u2028about it."),
        block_delta(0, type="signature_delta", signature="EqQBCgIYAh"),
        event("content_block_stop", index=0),
        event("ping"),
        event("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        block_delta(1, type="text_delta", text="I'll check "),
        block_delta(1, type="text_delta", text="the weather."),
        event("content_block_stop", index=1),
        event(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
        ),
        block_delta(2, type="input_json_delta", partial_json=""),
        block_delta(2, type="input_json_delta", partial_json='{"location": '),
        block_delta(2, type="input_json_delta", partial_json='"San Francisco"}'),
        event("content_block_stop", index=2),
        event(
            "message_delta",
            delta={"stop_reason": "tool_use", "stop_sequence": None},
            usage={"output_tokens": 89},
        ),
        event("message_stop"),
    ]
)


def provider_for(
    body: bytes | list[bytes],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[httpx.Request] | None = None,
    key: str | None = KEY,
) -> AnthropicProvider:
    pieces = body if isinstance(body, list) else [body]

    async def stream() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        all_headers = {"content-type": "text/event-stream", **(headers or {})}
        return httpx.Response(status, headers=all_headers, content=stream())

    return AnthropicProvider(
        "anthropic",
        "https://api.anthropic.test",
        api_key=key,
        transport=httpx.MockTransport(handler),
    )


async def run(provider: AnthropicProvider, request: ModelRequest = HELLO) -> list[StreamItem]:
    try:
        return [item async for item in provider.stream(request)]
    finally:
        await provider.aclose()


def assemble(items: list[StreamItem]) -> tuple[str, str, dict[int, ToolCall]]:
    text = "".join(i.text for i in items if isinstance(i, TextChunk))
    reasoning = "".join(i.text for i in items if isinstance(i, ReasoningChunk))
    calls: dict[int, list[str]] = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            call = calls.setdefault(item.index, ["", "", ""])
            if item.id:
                assert not call[0]
                call[0] = item.id
            if item.name:
                call[1] = item.name
            call[2] += item.arguments
    return text, reasoning, {i: ToolCall(*c) for i, c in calls.items()}


async def test_stream_events_become_items() -> None:
    items = await run(provider_for(STREAM))
    text, reasoning, calls = assemble(items)
    assert reasoning == "Let me think\u2028about it."
    assert text == "I'll check the weather."
    assert calls == {0: ToolCall("toolu_1", "get_weather", '{"location": "San Francisco"}')}
    assert items[-2:] == [
        UsageReport(Usage(input_tokens=130, output_tokens=89, cached_input_tokens=100)),
        StreamEnd("tool_use"),
    ]


async def test_one_read_is_coalesced() -> None:
    items = await run(provider_for(STREAM))
    assert items[:4] == [
        ReasoningChunk("Let me think\u2028about it."),
        ReasoningChunk("", signature="EqQBCgIYAh"),  # kept, to send the thinking back
        TextChunk("I'll check the weather."),
        ToolCallChunk(0, "toolu_1", "get_weather", '{"location": "San Francisco"}'),
    ]


@pytest.mark.parametrize("seed", range(25))
async def test_any_read_boundaries_give_the_same_answer(seed: int) -> None:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randrange(1, 60)))
    pieces = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True)]
    items = await run(provider_for(pieces))
    assert assemble(items) == assemble(await run(provider_for(STREAM)))
    assert items[-1] == StreamEnd("tool_use")


async def test_error_event_mid_stream() -> None:
    body = STREAM[: STREAM.index(b"event: content_block_start")] + event(
        "error", error={"type": "overloaded_error", "message": "Overloaded"}
    )
    with pytest.raises(ProviderError) as caught:
        await run(provider_for(body))
    assert caught.value.retryable and caught.value.code == "overloaded_error"
    assert "Overloaded" in caught.value.message


async def test_stream_cut_short_is_incomplete() -> None:
    body = STREAM[: STREAM.index(b"event: message_delta")]
    with pytest.raises(ProviderError) as caught:
        await run(provider_for(body))
    assert caught.value.retryable and caught.value.code == "incomplete_stream"


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (529, "overloaded_error", True),
    ],
)
async def test_http_errors(status: int, error_type: str, retryable: bool) -> None:
    body = json.dumps(
        {"type": "error", "error": {"type": error_type, "message": f"{error_type} with {KEY}"}}
    ).encode()
    provider = provider_for(body, status=status, headers={"retry-after": "7"})
    with pytest.raises(ProviderError) as caught:
        await run(provider)
    error = caught.value
    assert (error.status, error.code, error.retryable) == (status, error_type, retryable)
    assert error.retry_after == (7.0 if retryable else None)
    assert KEY not in error.message


async def test_request_headers_and_body() -> None:
    seen: list[httpx.Request] = []
    request = ModelRequest(
        "claude-sonnet-4",
        (
            Message("system", "Be brief."),
            Message("user", (TextPart("What is this?"), ImagePart("image/png", "iVBORw0KGgo="))),
            Message(
                "assistant",
                "Reading.",
                tool_calls=(
                    ToolCall("toolu_a", "read_file", '{"path": "a"}'),
                    ToolCall("toolu_b", "read_file", "not json"),
                ),
            ),
            Message("tool", "contents of a", tool_call_id="toolu_a"),
            Message("tool", (ImagePart("image/jpeg", "/9j/"),), tool_call_id="toolu_b"),
            Message("user", "and now?"),
            Message("assistant", ""),  # an interrupted, empty answer
            Message("user", "hello again"),
        ),
        tools=(ToolSpec("read_file", "Read a file", {"type": "object"}),),
        temperature=0.5,
    )
    await run(provider_for(STREAM, seen=seen), request)
    sent = seen[0]
    assert sent.url == "https://api.anthropic.test/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = json.loads(sent.content)
    assert body["model"] == "claude-sonnet-4" and body["stream"] is True
    assert body["max_tokens"] == default_max_tokens("claude-sonnet-4")
    assert body["temperature"] == 0.5
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"},
        }
    ]
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert messages[1]["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a"}},
        {
            "type": "tool_use",
            "id": "toolu_b",
            "name": "read_file",
            "input": {"_raw_arguments": "not json"},
        },
    ]
    content = messages[2]["content"]
    assert content[:2] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_a",
            "content": [{"type": "text", "text": "contents of a"}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
                }
            ],
        },
    ]
    assert content[2] == {"type": "text", "text": "and now?"}
    assert content[3] == {
        "type": "text",
        "text": "hello again",
        "cache_control": {"type": "ephemeral"},
    }


def test_max_tokens_defaults_by_family() -> None:
    assert default_max_tokens("claude-3-haiku-20240307") == 4096
    assert default_max_tokens("claude-3-5-sonnet-latest") == 8192
    assert default_max_tokens("claude-3-7-sonnet-latest") == 32000
    assert default_max_tokens("claude-opus-4-1") == 32000
    body = build_messages_body(ModelRequest("claude-3-haiku", HELLO.messages, max_tokens=100))
    assert body["max_tokens"] == 100
    extra = build_messages_body(
        ModelRequest(
            "m", HELLO.messages, extra={"thinking": {"type": "enabled", "budget_tokens": 1024}}
        )
    )
    assert extra["thinking"]["budget_tokens"] == 1024


async def test_prompt_too_long_is_a_context_overflow() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
    with pytest.raises(ProviderError) as caught:
        await run(provider_for(json.dumps(body).encode(), status=400))
    assert caught.value.is_context_overflow() and not caught.value.retryable


# --- over real HTTP, against the loopback server's /v1/messages route ----------------------


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


async def over_loopback(turns: list[dict[str, Any]], request: ModelRequest = HELLO) -> Any:
    async with LoopbackServer(turns) as server:
        provider = AnthropicProvider("anthropic", server.url, api_key=KEY)
        try:
            items = [item async for item in provider.stream(request)]
        except ProviderError as exc:
            return server, exc
        finally:
            await provider.aclose()
        return server, items


async def test_loopback_messages_route() -> None:
    turn = {
        "reasoning": "ponder " * 20,
        "text": "Writing it.\u2028Done",
        "chunk_size": 3,
        "tool_calls": [{"id": "toolu_9", "name": "write_file", "arguments": {"path": "a"}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12},
    }
    server, items = await over_loopback([turn])
    text, reasoning, calls = assemble(items)
    assert reasoning == "ponder " * 20 and text == "Writing it.\u2028Done"
    assert calls == {0: ToolCall("toolu_9", "write_file", '{"path": "a"}')}
    assert items[-2:] == [UsageReport(Usage(40, 12)), StreamEnd("tool_use")]
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.body["messages"][0]["content"][0]["text"] == "hello"


@pytest.mark.parametrize(
    ("fault", "code", "status"),
    [
        ({"status": 529, "body": OVERLOADED}, "overloaded_error", 529),
        ({"status": 429, "retry_after": 4}, "rate_limit_error", 429),
        ({"error_event_after_chunks": 2}, "overloaded_error", None),
        ({"disconnect_after_chunks": 2}, "connection_lost", None),
    ],
)
async def test_loopback_messages_faults(
    fault: dict[str, Any], code: str, status: int | None
) -> None:
    _, error = await over_loopback([{"text": "abcdefghij", "chunk_size": 2, "fault": fault}])
    assert isinstance(error, ProviderError)
    assert (error.code, error.status, error.retryable) == (code, status, True)
    if status == 429:
        assert error.retry_after == 4.0


async def test_loopback_match_skips_tool_result_messages() -> None:
    request = ModelRequest(
        "claude-sonnet-4",
        (
            Message("user", "please fix the bug"),
            Message("assistant", "", tool_calls=(ToolCall("t1", "read_file", "{}"),)),
            Message("tool", "file text", tool_call_id="t1"),
        ),
    )
    turns = [{"text": "wrong", "match": "unrelated"}, {"text": "right", "match": "fix the bug"}]
    _, items = await over_loopback(turns, request)
    assert assemble(items)[0] == "right"


async def test_loopback_connection_is_reused() -> None:
    async with LoopbackServer([{"text": "one"}, {"text": "two"}]) as server:
        provider = AnthropicProvider("anthropic", server.url)
        try:
            for expected in ("one", "two"):
                items = [item async for item in provider.stream(HELLO)]
                assert assemble(items)[0] == expected
        finally:
            await provider.aclose()
        assert server.connections == 1
        assert "x-api-key" not in server.requests[0].headers
