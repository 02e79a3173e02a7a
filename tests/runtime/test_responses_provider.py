"""ResponsesProvider (`openai-responses/`) against the loopback server's /v1/responses route:
request shape, text, reasoning summaries, tool call round trip, usage with cached tokens,
errors mid-stream and a retried request."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from runtime import Harness
from runtime.model.events import AttemptReset
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
from runtime.providers.registry import resolve_model
from runtime.providers.responses import ResponsesProvider, build_responses_body
from runtime.run.deps import LoopSettings
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox

TOOLS = (ToolSpec("read_file", "Read a file", {"type": "object"}),)
HELLO = ModelRequest(
    "gpt-5",
    (Message("system", "Be brief."), Message("user", "hello")),
    TOOLS,
    max_tokens=1000,
    session_id="conv-1",
)


async def collect(provider: ResponsesProvider, request: ModelRequest) -> list[StreamItem]:
    return [item async for item in provider.stream(request)]


def assemble(items: list[StreamItem]) -> tuple[str, str, dict[int, ToolCall]]:
    text = "".join(i.text for i in items if isinstance(i, TextChunk))
    reasoning = "".join(i.text for i in items if isinstance(i, ReasoningChunk))
    calls: dict[int, list[Any]] = {}
    for item in items:
        if isinstance(item, ToolCallChunk):
            call = calls.setdefault(item.index, [None, None, ""])
            call[0] = call[0] or item.id
            call[1] = call[1] or item.name
            call[2] += item.arguments
    return text, reasoning, {i: ToolCall(*c) for i, c in calls.items()}


async def over_loopback(
    turns: list[dict[str, Any]], request: ModelRequest = HELLO
) -> tuple[LoopbackServer, list[StreamItem] | ProviderError]:
    async with LoopbackServer(turns) as server:
        provider = ResponsesProvider("openai-responses", server.base_url)
        try:
            return server, await collect(provider, request)
        except ProviderError as exc:
            return server, exc
        finally:
            await provider.aclose()


async def test_text_reasoning_summary_and_usage_with_cached_tokens() -> None:
    turn = {
        "reasoning": "Thinking about it \u2028 carefully.",
        "text": "Hello there, in pieces.",
        "chunk_size": 3,
        "usage": {
            "prompt_tokens": 120,
            "cached_tokens": 100,
            "completion_tokens": 30,
            "reasoning_tokens": 12,
        },
    }
    server, items = await over_loopback([turn])
    assert isinstance(items, list)
    text, reasoning, calls = assemble(items)
    assert text == "Hello there, in pieces."
    assert reasoning == "Thinking about it \u2028 carefully."
    assert calls == {}
    assert items[-2:] == [UsageReport(Usage(120, 30, 100, 12)), StreamEnd("stop")]
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    body = sent.body
    assert body["stream"] is True and body["store"] is False
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["max_output_tokens"] == 1000
    assert body["reasoning"] == {"summary": "auto"}  # gpt-5 is a reasoning model
    assert body["prompt_cache_key"] == "conv-1"


def test_non_reasoning_models_are_not_asked_for_summaries() -> None:
    body = build_responses_body(ModelRequest("gpt-4.1", (Message("user", "x"),)))
    assert "reasoning" not in body and "instructions" not in body and "tools" not in body


def test_input_items_for_a_tool_round_trip_with_images() -> None:
    messages = (
        Message("system", "sys"),
        Message("user", (TextPart("look"), ImagePart("image/png", "AAAA"))),
        Message("assistant", "Reading.", tool_calls=(ToolCall("call_1", "read_file", "{}"),)),
        Message("tool", (TextPart("ok"), ImagePart("image/png", "BBBB")), tool_call_id="call_1"),
        Message("assistant", "Done."),
    )
    body = build_responses_body(ModelRequest("gpt-4.1", messages))
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Images from tool result call_1:"},
                {"type": "input_image", "image_url": "data:image/png;base64,BBBB"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done."}],
        },
    ]


async def test_tool_calls_stream_with_ids_and_arguments() -> None:
    turn = {
        "text": "Reading both.",
        "tool_calls": [
            {"id": "call_a", "name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "call_b", "name": "read_file", "arguments": {"path": "b.txt"}},
        ],
        "chunk_size": 5,
    }
    _, items = await over_loopback([turn])
    assert isinstance(items, list)
    text, _, calls = assemble(items)
    assert text == "Reading both."
    assert calls == {
        0: ToolCall("call_a", "read_file", '{"path": "a.txt"}'),
        1: ToolCall("call_b", "read_file", '{"path": "b.txt"}'),
    }
    assert items[-1] == StreamEnd("tool_calls")


async def test_output_limit_is_finish_reason_length() -> None:
    _, items = await over_loopback([{"text": "cut sho", "finish_reason": "length"}])
    assert isinstance(items, list)
    assert items[-1] == StreamEnd("length")


@pytest.mark.parametrize(
    ("fault", "code", "status", "retryable"),
    [
        ({"error_event_after_chunks": 2}, "server_error", None, True),
        ({"disconnect_after_chunks": 2}, "connection_lost", None, True),
        ({"status": 429, "retry_after": 3}, "rate_limit_error", 429, True),
        ({"status": 401}, "invalid_request_error", 401, False),
    ],
)
async def test_faults(
    fault: dict[str, Any], code: str, status: int | None, retryable: bool
) -> None:
    _, error = await over_loopback([{"text": "abcdefghij", "chunk_size": 2, "fault": fault}])
    assert isinstance(error, ProviderError)
    assert (error.code, error.status, error.retryable) == (code, status, retryable)
    if status == 429:
        assert error.retry_after == 3.0


async def test_context_overflow_mid_stream_is_recognised() -> None:
    body = {"error": {"message": "Your input exceeds the context window", "type": "x",
                      "code": "context_length_exceeded"}}  # fmt: skip
    _, error = await over_loopback([{"text": "abc", "fault": {"error_event_after_chunks": 0,
                                                              "body": body}}])  # fmt: skip
    assert isinstance(error, ProviderError)
    assert error.is_context_overflow() and not error.retryable


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


async def over_mock(payload: bytes) -> list[StreamItem] | ProviderError:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=payload)

    provider = ResponsesProvider(
        "openai-responses", "http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler)
    )
    try:
        return await collect(provider, HELLO)
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()


async def test_failed_response_and_arguments_only_in_done() -> None:
    failed = sse(
        {"type": "response.created", "response": {"status": "in_progress"}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "par"},
        {
            "type": "response.failed",
            "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
        },
    )
    error = await over_mock(failed)
    assert isinstance(error, ProviderError) and error.code == "server_error" and error.retryable
    assert "boom" in error.message
    done_only = sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "function_call", "call_id": "c1", "name": "read_file"},
        },
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": "{}"},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    items = await over_mock(done_only)
    assert isinstance(items, list)
    assert assemble(items)[2] == {0: ToolCall("c1", "read_file", "{}")}
    cut = sse({"type": "response.output_text.delta", "output_index": 0, "delta": "x"})
    error = await over_mock(cut)
    assert isinstance(error, ProviderError) and error.code == "incomplete_stream"


async def test_whole_json_response_when_the_server_does_not_stream() -> None:
    async with LoopbackServer([{"text": "at once", "reasoning": "hm"}]) as server:
        provider = ResponsesProvider("openai-responses", server.base_url)
        request = ModelRequest("gpt-4.1", (Message("user", "hi"),), extra={"stream": False})
        try:
            items = await collect(provider, request)
        finally:
            await provider.aclose()
    text, reasoning, _ = assemble(items)
    assert (text, reasoning) == ("at once", "hm")
    assert isinstance(items[-2], UsageReport) and items[-1] == StreamEnd("stop")


async def run_through_harness(tmp_path, turns: list[dict[str, Any]], prompt: str = "go"):
    async with LoopbackServer(turns) as server:
        provider, model = resolve_model(
            "openai-responses/gpt-5", env={"OPENAI_BASE_URL": server.base_url}
        )
        toolbox = RecordingToolbox()
        harness = await Harness.open(
            tmp_path / "bastion.sqlite",
            resolve_model=lambda spec: (provider, model),
            toolbox_factory=lambda conv: toolbox,
            loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        )
        try:
            conv = await harness.create_conversation(
                str(tmp_path),
                settings={"model": "openai-responses/gpt-5", "approval_mode": "full-auto"},
            )
            sub = harness.subscribe(conv.id)
            await harness.drive(conv.id)
            item = await harness.submit(conv.id, prompt)
            run = await harness.wait(item.id, conv.id)
            events = sub.pending()
            sub.close()
            answer = await harness.answer(run)
        finally:
            await harness.close()
            await provider.aclose()
    return server, run, events, answer, toolbox


async def test_tool_call_round_trip_through_the_harness(tmp_path) -> None:
    turns = [
        {
            "reasoning": "I should read it.",
            "tool_calls": [{"id": "call_7", "name": "read_file", "arguments": {"path": "a"}}],
            "usage": {"prompt_tokens": 50, "cached_tokens": 10, "completion_tokens": 5},
        },
        {"text": "It says ok.", "usage": {"prompt_tokens": 70, "completion_tokens": 4}},
    ]
    server, run, _, answer, toolbox = await run_through_harness(tmp_path, turns)
    assert run.state == "completed" and answer == "It says ok."
    assert toolbox.calls == [("read_file", {"path": "a"})]
    assert run.usage["input_tokens"] == 120 and run.usage["output_tokens"] == 9
    assert run.usage["cached_input_tokens"] == 10
    second = server.requests[1].body["input"]
    call = next(i for i in second if i.get("type") == "function_call")
    output = next(i for i in second if i.get("type") == "function_call_output")
    assert call == {
        "type": "function_call", "call_id": "call_7", "name": "read_file",
        "arguments": '{"path": "a"}',
    }  # fmt: skip
    assert output == {"type": "function_call_output", "call_id": "call_7", "output": "read_file ok"}
    assert second.index(call) + 1 == second.index(output)


async def test_error_mid_stream_is_retried_once_and_the_run_completes(tmp_path) -> None:
    turns = [
        {"text": "partial answer", "chunk_size": 3, "fault": {"error_event_after_chunks": 2}},
        {"text": "whole answer"},
    ]
    server, run, events, answer, _ = await run_through_harness(tmp_path, turns)
    assert run.state == "completed" and answer == "whole answer"
    resets = [e for e in events if isinstance(e, AttemptReset)]
    assert len(resets) == 1 and resets[0].attempt == 2
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
