"""OpenAIChatProvider against the loopback server (real HTTP) and httpx mocks; the registry."""

from __future__ import annotations

import email.utils
import json
import random
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from runtime.model.errors import ConfigError
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
from runtime.providers.httpbase import parse_retry_after
from runtime.providers.openai import OpenAIChatProvider
from runtime.providers.registry import ProviderSettings, is_loopback_url, resolve_model
from runtime.testing.server import LoopbackServer

KEY = "sk-test-0123456789abcdefghijklmnop"
HELLO = ModelRequest("gpt-test", (Message("user", "hello"),))


async def collect(provider: OpenAIChatProvider, request: ModelRequest = HELLO) -> list[StreamItem]:
    return [item async for item in provider.stream(request)]


def text_of(items: list[StreamItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextChunk))


def reasoning_of(items: list[StreamItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, ReasoningChunk))


def assemble_tool_calls(items: list[StreamItem]) -> dict[int, ToolCall]:
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    args: dict[int, str] = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            if item.id is not None:
                assert item.index not in ids, "an id is sent once"
                ids[item.index] = item.id
            if item.name is not None:
                assert item.index not in names, "a name is sent once"
                names[item.index] = item.name
            args[item.index] = args.get(item.index, "") + item.arguments
    return {i: ToolCall(ids[i], names[i], args[i]) for i in args}


@pytest.fixture
async def served() -> AsyncIterator[Callable[..., Any]]:
    """served(turns, **provider_kwargs) -> (server, provider); both closed afterwards."""
    opened: list[tuple[LoopbackServer, OpenAIChatProvider]] = []

    async def start(turns: list[dict[str, Any]], **kwargs: Any) -> Any:
        server = LoopbackServer(turns)
        await server.__aenter__()
        provider = OpenAIChatProvider("openai", server.base_url, **kwargs)
        opened.append((server, provider))
        return server, provider

    yield start
    for server, provider in opened:
        await provider.aclose()
        await server.__aexit__(None, None, None)


# --- streaming -----------------------------------------------------------------


async def test_text_usage_and_end(served: Any) -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 2},
        "cost": 0.00042,
    }
    _, provider = await served([{"text": "Hello, world!", "usage": usage}])
    items = await collect(provider)
    assert text_of(items) == "Hello, world!"
    assert items[-2:] == [
        UsageReport(Usage(12, 5, cached_input_tokens=8, reasoning_tokens=2, cost=0.00042)),
        StreamEnd("stop"),
    ]


async def test_many_tiny_deltas_are_coalesced(served: Any) -> None:
    text = "".join(f"word{i} " for i in range(40_000))[:200_000]
    _, provider = await served([{"text": text, "chunk_size": 4}])
    started = time.process_time()  # CPU time (the server runs in this process too)
    items = await collect(provider)
    elapsed = time.process_time() - started
    chunks = [i for i in items if isinstance(i, TextChunk)]
    assert text_of(items) == text
    assert len(chunks) < 2_000, "one item per network read, not one per event"
    assert elapsed < 5.0


async def test_unicode_separators_survive_inside_content(served: Any) -> None:
    text = "line\u2028sep\u2029para\x85nel\r\nreal newline ☕"
    _, provider = await served([{"text": text, "chunk_size": 1}])
    assert text_of(await collect(provider)) == text


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas(served: Any, field: str) -> None:
    turn = {"reasoning": "think " * 50, "text": "answer", "reasoning_field": field}
    _, provider = await served([turn])
    items = await collect(provider)
    assert reasoning_of(items) == "think " * 50
    assert text_of(items) == "answer"
    first_text = next(i for i, item in enumerate(items) if isinstance(item, TextChunk))
    assert all(not isinstance(item, ReasoningChunk) for item in items[first_text:])


async def test_tool_calls_arrive_in_pieces(served: Any) -> None:
    content = "line\n" * 100
    turn = {
        "text": "Writing.",
        "chunk_size": 3,
        "tool_calls": [
            {
                "id": "call_1",
                "name": "write_file",
                "arguments": {"path": "a.txt", "content": content},
            },
            {"id": "call_2", "name": "read_file", "arguments": '{"path": "b.txt"}'},
        ],
    }
    _, provider = await served([turn])
    items = await collect(provider)
    calls = assemble_tool_calls(items)
    assert calls[0].id == "call_1" and calls[0].name == "write_file"
    assert json.loads(calls[0].arguments) == {"path": "a.txt", "content": content}
    assert calls[1] == ToolCall("call_2", "read_file", '{"path": "b.txt"}')
    assert items[-1] == StreamEnd("tool_calls")


async def test_delayed_chunks_each_arrive(served: Any) -> None:
    _, provider = await served([{"text": "abcdef", "chunk_size": 2, "delay_ms": 20}])
    items = await collect(provider)
    assert [i.text for i in items if isinstance(i, TextChunk)] == ["ab", "cd", "ef"]


async def test_provider_is_reusable_across_requests(served: Any) -> None:
    server, provider = await served([{"text": "one"}, {"text": "two"}, {"text": "x" * 99_999}])
    assert text_of(await collect(provider)) == "one"
    assert text_of(await collect(provider)) == "two"
    assert len(await collect(provider)) > 2
    assert len(server.requests) == 3
    assert server.connections == 1, "the connection is kept alive between requests"


async def test_stopping_early_closes_cleanly(served: Any) -> None:
    _server, provider = await served([{"text": "x" * 100_000, "chunk_size": 1}, {"text": "next"}])
    stream = provider.stream(HELLO)
    async for _item in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert text_of(await collect(provider)) == "next"


# --- the request -----------------------------------------------------------------


async def test_request_body_shape(served: Any) -> None:
    server, provider = await served([{"text": "ok"}])
    request = ModelRequest(
        "gpt-test",
        (
            Message("system", "Be brief."),
            Message(
                "user",
                (TextPart("What is this?"), ImagePart("image/png", "iVBORw0KGgo=")),
            ),
            Message(
                "assistant",
                "Let me read it.",
                tool_calls=(ToolCall("call_9", "read_file", '{"path": "a"}'),),
            ),
            Message("tool", "file contents", tool_call_id="call_9"),
        ),
        tools=(
            ToolSpec(
                "read_file",
                "Read a file",
                {"type": "object", "properties": {"path": {"type": "string"}}},
            ),
        ),
        max_tokens=256,
        temperature=0.2,
    )
    await collect(provider, request)
    body = server.requests[0].body
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": "Let me read it.",
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "file contents"},
    ]


async def test_images_in_tool_results_follow_the_tool_batch(served: Any) -> None:
    server, provider = await served([{"text": "ok"}])
    calls = (ToolCall("a", "read_file", "{}"), ToolCall("b", "read_file", "{}"))
    request = ModelRequest(
        "m",
        (
            Message("user", "look"),
            Message("assistant", "", tool_calls=calls),
            Message(
                "tool", (TextPart("an image"), ImagePart("image/png", "AAAA")), tool_call_id="a"
            ),
            Message("tool", "text only", tool_call_id="b"),
        ),
    )
    await collect(provider, request)
    messages = server.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[1]["content"] is None
    assert messages[2]["content"] == "an image"
    assert messages[4]["content"][1]["image_url"]["url"] == "data:image/png;base64,AAAA"


async def test_authorization_header_only_with_a_key(served: Any) -> None:
    server, provider = await served([{"text": "a"}], api_key=KEY, headers={"X-Title": "bastion"})
    await collect(provider)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.requests[0].headers["x-title"] == "bastion"
    server2, keyless = await served([{"text": "b"}])
    await collect(keyless)
    assert "authorization" not in server2.requests[0].headers


async def test_extra_fields_are_merged_into_the_body(served: Any) -> None:
    server, provider = await served([{"text": "a"}])
    await collect(provider, ModelRequest("m", HELLO.messages, extra={"reasoning_effort": "low"}))
    assert server.requests[0].body["reasoning_effort"] == "low"


# --- faults from the loopback server ------------------------------------------------


async def fault(
    served: Any, spec: dict[str, Any], **kwargs: Any
) -> tuple[ProviderError, list[Any]]:
    _, provider = await served(
        [{"text": "abcdefghij" * 10, "chunk_size": 5, "fault": spec}], **kwargs
    )
    seen: list[Any] = []
    with pytest.raises(ProviderError) as caught:
        async for item in provider.stream(HELLO):
            seen.append(item)
    return caught.value, seen


async def test_429_with_retry_after_seconds(served: Any) -> None:
    error, _ = await fault(served, {"status": 429, "retry_after": 2})
    assert (error.status, error.retryable, error.retry_after) == (429, True, 2.0)
    assert "429" in error.message and error.provider == "openai"


async def test_503_with_retry_after_ms(served: Any) -> None:
    error, _ = await fault(served, {"status": 503, "retry_after_ms": 1500})
    assert (error.status, error.retryable, error.retry_after) == (503, True, 1.5)


@pytest.mark.parametrize("status", [408, 409, 500, 502, 504])
async def test_retryable_statuses(served: Any, status: int) -> None:
    error, _ = await fault(served, {"status": status})
    assert error.retryable and error.status == status and error.retry_after is None


async def test_context_overflow_is_not_retryable(served: Any) -> None:
    """Not a transport retry: the model loop compacts and then retries once
    (tests/runtime/test_compaction.py::test_context_overflow_compacts_and_retries_once)."""
    body = {
        "error": {
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    error, _ = await fault(served, {"status": 400, "body": body})
    assert not error.retryable
    assert error.code == "context_length_exceeded"
    assert error.is_context_overflow()
    assert "maximum context length is 128000" in error.message


async def test_llama_cpp_context_overflow_is_recognised(served: Any) -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }
    }
    error, _ = await fault(served, {"status": 400, "body": body})
    assert error.is_context_overflow() and not error.retryable


async def test_auth_error_never_shows_the_key(served: Any) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    error, _ = await fault(served, {"status": 401, "body": body}, api_key=KEY)
    assert error.is_auth() and not error.retryable
    assert KEY not in error.message and KEY not in str(error)
    assert KEY[:10] not in json.dumps(error.to_dict())


async def test_quota_429_is_not_retryable(served: Any) -> None:
    body = {"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}
    error, _ = await fault(served, {"status": 429, "body": body})
    assert error.status == 429 and not error.retryable and error.code == "insufficient_quota"


async def test_disconnect_mid_stream(served: Any) -> None:
    error, seen = await fault(served, {"disconnect_after_chunks": 3})
    assert error.retryable and error.code in ("connection_lost", "incomplete_stream")
    assert text_of(seen).startswith("abcde")  # what came before the drop was delivered


async def test_error_event_mid_stream(served: Any) -> None:
    error, _seen = await fault(served, {"error_event_after_chunks": 2})
    assert error.retryable and error.code == "server_error"
    assert "loopback injected" in error.message


async def test_hang_hits_the_read_timeout(served: Any) -> None:
    """An httpx read timeout shorter than the watchdog is the same silence, named by its length."""
    timeout = httpx.Timeout(5.0, read=0.3)
    error, _seen = await fault(served, {"hang_after_chunks": 2}, timeout=timeout)
    assert error.retryable and error.code == "idle_timeout"
    assert error.reason == "no data for 0.3 s"


async def test_slow_first_byte_within_the_timeout(served: Any) -> None:
    _, provider = await served([{"text": "late", "fault": {"delay_first_byte_ms": 200}}])
    assert text_of(await collect(provider)) == "late"


async def test_slow_first_byte_past_the_timeout(served: Any) -> None:
    error, _ = await fault(
        served, {"delay_first_byte_ms": 1000}, timeout=httpx.Timeout(5.0, read=0.2)
    )
    assert error.retryable and error.code == "idle_timeout"


async def test_fail_once_then_succeed(served: Any) -> None:
    _, provider = await served([{"fault": {"status": 500}}, {"text": "fine"}])
    with pytest.raises(ProviderError):
        await collect(provider)
    assert text_of(await collect(provider)) == "fine"


async def test_script_exhausted_is_a_400(served: Any) -> None:
    _, provider = await served([])
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert caught.value.status == 400 and not caught.value.retryable
    assert "loopback script exhausted" in caught.value.message


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIChatProvider("openai", f"http://127.0.0.1:{port}/v1", api_key=KEY)
    try:
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
    finally:
        await provider.aclose()
    assert caught.value.retryable and caught.value.code == "connect_error"
    assert KEY not in caught.value.message


# --- wire shapes from other servers, through httpx.MockTransport ------------------------


def mocked(
    body: bytes,
    *,
    status: int = 200,
    content_type: str = "text/event-stream",
    key: str | None = None,
) -> OpenAIChatProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"content-type": content_type}, content=body)

    return OpenAIChatProvider(
        "mock", "http://mock.invalid/v1", api_key=key, transport=httpx.MockTransport(handler)
    )


def sse(*objects: Any, done: bool = True) -> bytes:
    events = [f"data: {json.dumps(o)}\n\n" for o in objects]
    if done:
        events.append("data: [DONE]\n\n")
    return "".join(events).encode()


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


async def run_mock(provider: OpenAIChatProvider) -> list[StreamItem]:
    try:
        return await collect(provider)
    finally:
        await provider.aclose()


async def test_stream_without_done_or_finish_is_incomplete() -> None:
    with pytest.raises(ProviderError) as caught:
        await run_mock(mocked(sse(delta(content="partial"), done=False)))
    assert caught.value.retryable and caught.value.code == "incomplete_stream"


async def test_stream_with_finish_but_no_done_is_complete() -> None:
    items = await run_mock(mocked(sse(delta(content="ok"), delta("stop"), done=False)))
    assert items == [TextChunk("ok"), StreamEnd("stop")]


async def test_final_event_without_blank_line() -> None:
    body = sse(delta(content="ok"), done=False) + b"data: " + json.dumps(delta("stop")).encode()
    assert await run_mock(mocked(body)) == [TextChunk("ok"), StreamEnd("stop")]


async def test_openrouter_style_error_chunk() -> None:
    error_chunk = {
        "error": {"code": 502, "message": "Upstream provider went away"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    with pytest.raises(ProviderError) as caught:
        await run_mock(mocked(sse(delta(content="Hi"), error_chunk)))
    assert caught.value.status == 502 and caught.value.retryable
    assert "Upstream provider went away" in caught.value.message


async def test_error_event_type() -> None:
    body = b'event: error\ndata: {"error": {"message": "bad request", "code": "invalid"}}\n\n'
    with pytest.raises(ProviderError) as caught:
        await run_mock(mocked(body))
    assert caught.value.code == "invalid" and not caught.value.retryable


async def test_non_json_event_is_an_error() -> None:
    with pytest.raises(ProviderError) as caught:
        await run_mock(mocked(b"data: {not json\n\n"))
    assert caught.value.code == "invalid_stream"


async def test_html_error_page_is_summarised() -> None:
    provider = mocked(b"<html>Bad Gateway</html>", status=502, content_type="text/html")
    with pytest.raises(ProviderError) as caught:
        await run_mock(provider)
    assert caught.value.retryable and "<html>" not in caught.value.message


async def test_key_echoed_in_plain_text_error_is_redacted() -> None:
    provider = mocked(f"bad key {KEY}".encode(), status=403, content_type="text/plain", key=KEY)
    with pytest.raises(ProviderError) as caught:
        await run_mock(provider)
    assert KEY not in caught.value.message and caught.value.is_auth()


async def test_non_streamed_json_answer_is_accepted() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "whole",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    items = await run_mock(mocked(json.dumps(body).encode(), content_type="application/json"))
    assert items == [
        TextChunk("whole"),
        ToolCallChunk(0, "c", "f", "{}"),
        UsageReport(Usage(3, 1)),
        StreamEnd("tool_calls"),
    ]


async def test_tool_call_index_reused_for_a_new_call() -> None:
    call = {"type": "function"}
    body = sse(
        delta(
            tool_calls=[
                {"index": 0, "id": "a", **call, "function": {"name": "f", "arguments": "{}"}}
            ]
        ),
        delta(
            tool_calls=[
                {"index": 0, "id": "b", **call, "function": {"name": "g", "arguments": "{"}}
            ]
        ),
        delta(tool_calls=[{"index": 0, "function": {"arguments": "}"}}]),
        delta("tool_calls"),
    )
    calls = assemble_tool_calls(await run_mock(mocked(body)))
    assert calls == {0: ToolCall("a", "f", "{}"), 1: ToolCall("b", "g", "{}")}


async def test_crlf_stream_from_a_proxy() -> None:
    body = sse(delta(content="a\u2028"), delta(content="b"), delta("stop")).replace(b"\n", b"\r\n")
    items = await run_mock(mocked(body))
    assert text_of(items) == "a\u2028b" and items[-1] == StreamEnd("stop")


def test_retry_after_http_date() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30, abs=1.5)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({}) is None


# --- the registry ---------------------------------------------------------------------


async def resolved(spec: str, env: dict[str, str], **kwargs: Any) -> tuple[Any, str]:
    provider, model = resolve_model(spec, env=env, **kwargs)
    await provider.aclose()
    return provider, model


async def test_openai_defaults() -> None:
    provider, model = await resolved("openai/gpt-4.1", {"OPENAI_API_KEY": KEY})
    assert (provider.name, provider.base_url, model) == (
        "openai",
        "https://api.openai.com/v1",
        "gpt-4.1",
    )


async def test_model_name_keeps_everything_after_the_first_slash() -> None:
    provider, model = await resolved(
        "openai/meta-llama/llama-3.3-70b", {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/"}
    )
    assert model == "meta-llama/llama-3.3-70b" and provider.base_url == "http://127.0.0.1:8000/v1"


def test_missing_openai_key() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model("openai/gpt-4.1", env={})
    assert caught.value.message == "OPENAI_API_KEY is not set"
    assert caught.value.hint == "export OPENAI_API_KEY=... or pick another --model"


@pytest.mark.parametrize(
    "base", ["http://localhost:9/v1", "http://127.0.0.2:9/v1", "http://[::1]:9/v1"]
)
async def test_no_key_needed_on_loopback(base: str) -> None:
    provider, _ = await resolved("openai/x", {"OPENAI_BASE_URL": base})
    assert provider.base_url == base


@pytest.mark.parametrize(
    ("host", "base"),
    [
        (None, "http://127.0.0.1:11434/v1"),
        ("127.0.0.1:11500", "http://127.0.0.1:11500/v1"),
        ("http://gpu-box:11434", "http://gpu-box:11434/v1"),
        ("http://gpu-box:11434/", "http://gpu-box:11434/v1"),
        ("0.0.0.0", "http://127.0.0.1:11434/v1"),
        ("https://ollama.example.com/proxy/v1", "https://ollama.example.com/proxy/v1"),
    ],
)
async def test_ollama_host(host: str | None, base: str) -> None:
    env = {"OLLAMA_HOST": host} if host else {}
    provider, model = await resolved("ollama/llama3.2", env)
    assert (provider.base_url, model) == (base, "llama3.2")


async def test_custom_openai_compatible_provider() -> None:
    settings = {
        "openrouter": ProviderSettings(
            base_url="https://openrouter.ai/api/v1",
            api_key_env="OPENROUTER_API_KEY",
            headers={"X-Title": "bastion"},
        )
    }
    provider, model = await resolved(
        "openrouter/anthropic/claude-sonnet-4", {"OPENROUTER_API_KEY": KEY}, providers=settings
    )
    assert (provider.name, provider.base_url, model) == (
        "openrouter",
        "https://openrouter.ai/api/v1",
        "anthropic/claude-sonnet-4",
    )
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY is not set"):
        resolve_model("openrouter/x", env={}, providers=settings)


async def test_settings_override_builtin_defaults() -> None:
    settings = {"openai": ProviderSettings(base_url="http://127.0.0.1:1/v1", api_key_env="MY_KEY")}
    provider, _ = await resolved("openai/m", {}, providers=settings)
    assert provider.base_url == "http://127.0.0.1:1/v1"
    with pytest.raises(ConfigError, match="MY_KEY is not set"):
        resolve_model(
            "openai/m", env={}, providers={"openai": ProviderSettings(api_key_env="MY_KEY")}
        )


async def test_environment_base_url_wins_over_config() -> None:
    settings = {"openai": ProviderSettings(base_url="https://example.com/v1")}
    provider, _ = await resolved(
        "openai/m", {"OPENAI_BASE_URL": "http://127.0.0.1:5/v1"}, providers=settings
    )
    assert provider.base_url == "http://127.0.0.1:5/v1"


@pytest.mark.parametrize(
    ("spec", "env", "providers", "needle"),
    [
        ("gpt-4.1", {}, {}, "PROVIDER/NAME"),
        ("openai/", {}, {}, "PROVIDER/NAME"),
        ("/gpt", {}, {}, "PROVIDER/NAME"),
        ("mistral/large", {}, {}, "unknown provider 'mistral'"),
        ("anthropic/claude-sonnet-4", {}, {}, "ANTHROPIC_API_KEY is not set"),
        ("openai-responses/gpt-5", {}, {}, "OPENAI_API_KEY is not set"),
        ("openai/x", {"OPENAI_BASE_URL": "not a url", "OPENAI_API_KEY": KEY}, {}, "not a valid"),
        ("openai/x", {"OPENAI_BASE_URL": "ftp://h/v1", "OPENAI_API_KEY": KEY}, {}, "not a valid"),
        ("openai/x", {"OPENAI_BASE_URL": "http://[::1", "OPENAI_API_KEY": KEY}, {}, "not a valid"),
        ("vllm/x", {}, {"vllm": ProviderSettings()}, "has no base_url"),
        ("vllm/x", {}, {"vllm": ProviderSettings(base_url="http://")}, "not a valid"),
    ],
)
def test_config_errors(
    spec: str, env: dict[str, str], providers: dict[str, ProviderSettings], needle: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model(spec, env=env, providers=providers)
    assert needle in str(caught.value)
    assert caught.value.code == "configuration"


def test_errors_name_the_known_prefixes() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_model("nope/x", env={}, providers={"openrouter": ProviderSettings("https://x/v1")})
    text = str(caught.value)
    for prefix in ("openai/", "anthropic/", "openai-responses/", "ollama/", "openrouter/"):
        assert prefix in text


async def test_anthropic_resolves() -> None:
    provider, model = await resolved("anthropic/claude-sonnet-4", {"ANTHROPIC_API_KEY": KEY})
    assert (provider.name, provider.base_url, model) == (
        "anthropic",
        "https://api.anthropic.com",
        "claude-sonnet-4",
    )
    provider, _ = await resolved("anthropic/c", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/v1"})
    assert provider.base_url == "http://127.0.0.1:9"


def test_is_loopback_url() -> None:
    assert is_loopback_url("http://localhost:1/v1")
    assert is_loopback_url("http://127.9.9.9/v1")
    assert is_loopback_url("http://[::1]:8080")
    assert not is_loopback_url("https://api.openai.com/v1")
    assert not is_loopback_url("http://10.0.0.1/v1")


# --- randomized: coalescing and the batch fast paths never change the meaning --------------

ALPHABET = ["a", "b", " ", '"', "\\", "\n", "\r", "\u2028", "\u2029", "\x85", "é", "☕", "}", ","]


def random_stream(rng: random.Random) -> tuple[bytes, str, str, dict[int, str]]:
    """Runs of text, reasoning and tool-call deltas in one envelope, as a server sends them."""
    envelope = {"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    objects: list[dict[str, Any]] = [{**envelope, **delta(role="assistant", content="")}]
    text, reasoning, args = "", "", {}
    for _ in range(rng.randrange(1, 30)):
        kind = rng.random()
        for _ in range(rng.randrange(1, 60)):
            piece = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 6)))
            if kind < 0.6:
                objects.append({**envelope, **delta(content=piece)})
                text += piece
            elif kind < 0.85:
                objects.append({**envelope, **delta(reasoning_content=piece)})
                reasoning += piece
            else:
                index = rng.randrange(0, 3)
                call: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
                if index not in args:
                    call.update(id=f"call_{index}", type="function")
                    call["function"]["name"] = f"tool_{index}"
                objects.append({**envelope, **delta(tool_calls=[call])})
                args[index] = args.get(index, "") + piece
    objects.append({**envelope, **delta("stop")})
    objects.append(
        {**envelope, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    )
    ascii_only = rng.random() < 0.5
    separators = rng.choice([(",", ":"), (", ", ": ")])
    events = [
        f"data: {json.dumps(o, ensure_ascii=ascii_only, separators=separators)}\n\n"
        for o in objects
    ]
    return "".join([*events, "data: [DONE]\n\n"]).encode(), text, reasoning, args


@pytest.mark.parametrize("seed", range(40))
async def test_random_streams_at_random_read_sizes(seed: int) -> None:
    rng = random.Random(seed)
    body, text, reasoning, args = random_stream(rng)
    sizes = [rng.choice([1, 7, 64, 500, 4096, 65536]) for _ in range(len(body))]

    async def pieces() -> AsyncIterator[bytes]:
        at = 0
        for size in sizes:
            if at >= len(body):
                break
            yield body[at : at + size]
            at += size

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=pieces())

    provider = OpenAIChatProvider(
        "r", "http://r.invalid/v1", transport=httpx.MockTransport(handler)
    )
    items = await run_mock(provider)
    assert text_of(items) == text
    assert reasoning_of(items) == reasoning
    calls = assemble_tool_calls(items)
    assert {i: c.arguments for i, c in calls.items()} == args
    assert all(calls[i].name == f"tool_{i}" and calls[i].id == f"call_{i}" for i in calls)
    assert items[-2:] == [UsageReport(Usage(1, 2)), StreamEnd("stop")]


async def test_redirect_is_reported_not_followed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"location": "https://elsewhere.example/v1"})

    provider = OpenAIChatProvider(
        "r", "http://r.invalid/v1", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(ProviderError) as caught:
        await run_mock(provider)
    assert caught.value.status == 301 and not caught.value.retryable
    assert "https://elsewhere.example/v1" in caught.value.message


async def test_ollama_config_base_url_and_environment_order() -> None:
    settings = {"ollama": ProviderSettings(base_url="http://gpu-box:11434/v1")}
    provider, _ = await resolved("ollama/m", {}, providers=settings)
    assert provider.base_url == "http://gpu-box:11434/v1"
    provider, _ = await resolved("ollama/m", {"OLLAMA_HOST": "127.0.0.1:1"}, providers=settings)
    assert provider.base_url == "http://127.0.0.1:1/v1"


async def test_proxy_variables_do_not_apply_to_loopback(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    _, provider = await served([{"text": "direct"}])
    assert text_of(await collect(provider)) == "direct"
