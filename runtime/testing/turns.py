"""Scripted turns for the loopback server, and the OpenAI wire format they become.

A turn is one model response: text, reasoning, tool calls, usage, a finish
reason, how finely to cut it into chunks, and optionally a fault to inject.
`LoopbackTurn.from_dict` reads the JSON form used by `--script` files:

    {"text": "...", "chunk_size": 4, "delay_ms": 0, "reasoning": "...",
     "tool_calls": [{"id": "call_1", "name": "write_file",
                     "arguments": {...} or "raw json string"}],
     "usage": {"prompt_tokens": 10, "completion_tokens": 3},
     "finish_reason": "stop" | "tool_calls",
     "match": "substring of the last user message",
     "unless": ["marker", ...], "repeat": false, "pauses": {"12": 400},
     "omit_usage": false,
     "fault": {"status": 429, "retry_after": 1, "body": {...}}
            | {"disconnect_after_chunks": k} | {"error_event_after_chunks": k}
            | {"hang_after_chunks": k} | {"delay_first_byte_ms": n}
            | {"ping_after_chunks": k, "ping_interval_ms": n}}

Faults for the watchdog: `hang_after_chunks` sends k content chunks and then
nothing, keeping the connection open (a silent stream); `delay_first_byte_ms`
holds back the response headers; `ping_after_chunks` sends k content chunks
and then only keep-alives (`: ping` comments; Anthropic `ping` events on the
Messages route) every `ping_interval_ms` (default 50), until the client goes
away: a stream that is alive but makes no progress. A turn with no text, reasoning or tool call
(`{}`, or `{"reasoning": "..."}`) is a well-formed stream with no answer in it
(an empty response), in both wire formats.

`render_stream` turns a turn into the exact bytes OpenAI streams: one
`data: {chat.completion.chunk}\\n\\n` event per piece, a finish chunk, the usage
chunk with `choices: []` when `stream_options.include_usage` was asked for, and
`data: [DONE]`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.model.llm import ToolCall

__all__ = ["Fault", "LoopbackTurn", "RenderedStream", "completion_body", "error_body"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class Fault:
    """What goes wrong with a turn. Counts are of content chunks (not the role chunk)."""

    status: int | None = None
    retry_after: float | str | None = None
    retry_after_ms: float | None = None
    body: Any = None
    disconnect_after_chunks: int | None = None
    error_event_after_chunks: int | None = None
    hang_after_chunks: int | None = None
    delay_first_byte_ms: float = 0.0
    ping_after_chunks: int | None = None
    ping_interval_ms: float = 50.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        return cls(**dict(data))

    def cut_after(self) -> int | None:
        """The chunk count after which the stream stops normally, if it does."""
        counts = [
            c
            for c in (
                self.disconnect_after_chunks,
                self.error_event_after_chunks,
                self.hang_after_chunks,
                self.ping_after_chunks,
            )
            if c is not None
        ]
        return min(counts) if counts else None


@dataclass(frozen=True, slots=True)
class LoopbackTurn:
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Mapping[str, Any] | None = None
    finish_reason: str | None = None
    chunk_size: int = 4
    delay_ms: float = 0.0
    fault: Fault | None = None
    match: str | None = None
    #: The delta field reasoning travels in: "reasoning_content" (DeepSeek,
    #: vLLM, llama.cpp) or "reasoning" (OpenRouter, Ollama).
    reasoning_field: str = "reasoning_content"
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: A step of a task: served (and never used up) while no tool result in the
    #: request contains any of these markers, so a request repeated after a crash,
    #: or after an interrupted call, gets the same step again.
    unless: tuple[str, ...] = ()
    #: Never used up: served again whenever it is next (a final answer that a crash cut).
    repeat: bool = False
    #: Send no usage chunk (a server that reports none: bastion then estimates).
    omit_usage: bool = False
    #: Extra milliseconds slept before content chunk N (a model pausing mid-answer).
    pauses: Mapping[str, float] = field(default_factory=dict)
    #: Tests only (not in --script files): before content chunk N (N = the number of
    #: chunks: before the finish) the stream waits until `holds[N]`, a
    #: `threading.Event`, is set: a model that pauses until the test lets it go on.
    holds: Mapping[int, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopbackTurn:
        data = dict(data)
        calls = tuple(_tool_call(i, c) for i, c in enumerate(data.pop("tool_calls", None) or ()))
        fault = data.pop("fault", None)
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown turn fields: {sorted(unknown)}")
        if "unless" in data:
            data["unless"] = tuple(data["unless"])
        return cls(
            tool_calls=calls,
            fault=Fault.from_dict(fault) if fault else None,
            **data,
        )

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


def _tool_call(position: int, data: Any) -> ToolCall:
    if isinstance(data, ToolCall):
        return data
    if not isinstance(data, Mapping) or "name" not in data:
        raise ValueError(f"tool call {position} needs at least a name: {data!r}")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(str(data.get("id") or f"call_{position + 1}"), str(data["name"]), arguments)


def as_turn(turn: LoopbackTurn | Mapping[str, Any]) -> LoopbackTurn:
    return turn if isinstance(turn, LoopbackTurn) else LoopbackTurn.from_dict(turn)


def error_body(
    message: str, *, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def usage_for(turn: LoopbackTurn, request_body: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's usage, or a deterministic estimate (4 characters a token)."""
    prompt_chars = len(_dumps(request_body.get("messages", [])))
    completion_chars = len(turn.text) + len(turn.reasoning)
    completion_chars += sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
    usage: dict[str, Any] = {
        "prompt_tokens": max(1, prompt_chars // 4),
        "completion_tokens": max(1, completion_chars // 4),
    }
    usage.update(turn.usage or {})
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return usage


@dataclass(slots=True)
class RenderedStream:
    """The SSE events of one streamed turn, split where faults may cut in.

    `head` is the role chunk, `chunks` one event per content piece (what fault
    counts refer to), `tail` the finish chunk, usage chunk and `[DONE]`.
    """

    head: bytes
    chunks: list[bytes]
    tail: bytes


def render_stream(
    turn: LoopbackTurn, request_body: Mapping[str, Any], *, serial: int
) -> RenderedStream:
    model = request_body.get("model")
    model_json = _dumps(model if isinstance(model, str) else "loopback")
    prefix = (
        f'{{"id":"chatcmpl-loopback-{serial}","object":"chat.completion.chunk",'
        f'"created":{int(time.time())},"model":{model_json},'
        '"system_fingerprint":"fp_loopback","choices":[{"index":0,"delta":'
    )
    open_suffix = ',"logprobs":null,"finish_reason":null}]}\n\n'
    events: list[str] = []
    size = turn.chunk_size
    head = f'data: {prefix}{{"role":"assistant","content":""}}{open_suffix}'
    if turn.reasoning:
        start = f'data: {prefix}{{"{turn.reasoning_field}":'
        events.extend([f"{start}{_dumps(p)}}}{open_suffix}" for p in _pieces(turn.reasoning, size)])
    if turn.text:
        start = f'data: {prefix}{{"content":'
        events.extend([f"{start}{_dumps(p)}}}{open_suffix}" for p in _pieces(turn.text, size)])
    for index, call in enumerate(turn.tool_calls):
        first = {
            "tool_calls": [
                {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
        }
        events.append(f"data: {prefix}{_dumps(first)}{open_suffix}")
        start = f'data: {prefix}{{"tool_calls":[{{"index":{index},"function":{{"arguments":'
        events.extend(
            [f"{start}{_dumps(p)}}}}}]}}{open_suffix}" for p in _pieces(call.arguments, size)]
        )
    finish = _dumps(turn.effective_finish_reason)
    tail = [f'data: {prefix}{{}},"logprobs":null,"finish_reason":{finish}}}]}}\n\n']
    options = request_body.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage") and not turn.omit_usage:
        usage = _dumps(usage_for(turn, request_body))
        usage_prefix = prefix[: prefix.index('"choices":')]
        tail.append(f'data: {usage_prefix}"choices":[],"usage":{usage}}}\n\n')
    tail.append("data: [DONE]\n\n")
    # A lone surrogate (or half of a pair cut between two events) is sent as JSON
    # spells it, `\udXXX`, as servers that cut at UTF-16 units do.
    events_bytes = [e.encode("utf-8", "backslashreplace") for e in events]
    return RenderedStream(head.encode(), events_bytes, "".join(tail).encode())


def completion_body(
    turn: LoopbackTurn, request_body: Mapping[str, Any], *, serial: int
) -> dict[str, Any]:
    """A non-streamed `chat.completion` for a request without `stream: true`."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message[turn.reasoning_field] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in turn.tool_calls
        ]
    model = request_body.get("model")
    return {
        "id": f"chatcmpl-loopback-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model if isinstance(model, str) else "loopback",
        "choices": [
            {"index": 0, "message": message, "finish_reason": turn.effective_finish_reason}
        ],
        "usage": usage_for(turn, request_body),
    }


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat request ("" when there is none)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        messages = body.get("input")  # the Responses API: input items
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                parts = [p for p in content if isinstance(p, Mapping)]
                if parts and all(p.get("type") == "tool_result" for p in parts):
                    continue  # Anthropic carries tool results in user messages
                return "\n".join(str(p.get("text", "")) for p in parts if "text" in p)
            return ""
    return ""
