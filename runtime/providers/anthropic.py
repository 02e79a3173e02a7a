"""Anthropic Messages API over httpx, streamed with SSE.

Request: `POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version`,
the system prompt as the top-level `system` field, tool calls as `tool_use`
blocks of assistant messages and tool results as `tool_result` blocks of user
messages (consecutive messages of one role are merged, tool results first, as
the API requires). Prompt caching breakpoints are set on the tools, the system prompt and
on the newest message, so a long conversation is re-read from the cache.

Stream: `message_start` (input usage), `content_block_start` / `_delta`
(`text_delta`, `thinking_delta`, `input_json_delta`) / `_stop`,
`message_delta` (stop reason, output usage), `message_stop`, `ping`, `error`.
Consecutive deltas of one network read are coalesced as in the OpenAI provider.

Usage: `input_tokens` counts every prompt token (uncached + cache reads + cache
writes), `cached_input_tokens` the cache reads, as the OpenAI provider reports
them. `StreamEnd.finish_reason` is Anthropic's `stop_reason` as sent
("end_turn", "tool_use", "max_tokens", ...).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

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
    ToolCallChunk,
    Usage,
    UsageReport,
)
from runtime.providers.httpbase import (
    DEFAULT_IDLE_TIMEOUT,
    Redactor,
    empty_response_error,
    error_from_body,
    event_items,
    make_client,
    open_stream,
    status_error,
    stream_timeout,
    transport_error,
)
from runtime.providers.sse import ServerSentEvent

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider", "build_messages_body", "default_max_tokens"]

ANTHROPIC_VERSION = "2023-06-01"
_TEXT, _REASONING, _TOOL = 1, 2, 3
_EPHEMERAL = {"type": "ephemeral"}


class AnthropicProvider:
    """A `Provider` for the Anthropic Messages API; owns one httpx client."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._url = self.base_url + "/v1/messages"
        self._redact = Redactor(api_key)
        self.idle_timeout = idle_timeout
        client_headers = {
            "Accept": "text/event-stream",
            "User-Agent": "bastion",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key:
            client_headers["x-api-key"] = api_key
        client_headers.update(headers or {})
        if timeout is None:
            timeout = stream_timeout(idle_timeout)
        self._client = make_client(self.base_url, client_headers, timeout, transport)

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self.name!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        body = build_messages_body(request)
        try:
            async with open_stream(
                self._client, self._url, body, idle=self.idle_timeout, provider=self.name
            ) as response:
                if not response.is_success:
                    payload = await response.aread()
                    raise status_error(
                        self.name,
                        response.status_code,
                        response.headers,
                        payload,
                        redact=self._redact,
                    )
                state = _MessageStream(self.name, self._redact)
                async for item in event_items(response, state, self.idle_timeout, self.name):
                    yield item
        except httpx.RequestError as exc:
            raise transport_error(
                self.name, self._url, exc, redact=self._redact, idle=self.idle_timeout
            ) from exc


class _MessageStream:
    """Turns Messages API stream events into coalesced stream items."""

    def __init__(self, provider: str, redact: Redactor) -> None:
        self._provider = provider
        self._redact = redact
        self._items: list[StreamItem] = []
        self._kind = 0
        self._buffer: list[str] = []
        self._tool_index = -1
        self._tool_head: tuple[str | None, str | None] = (None, None)
        self._blocks: dict[int, int] = {}  # content block index -> tool call ordinal
        self._usage: dict[str, int] = {}
        self._answered = False  # any answer text or tool call yet
        self.stop_reason: str | None = None
        self.stopped = False

    def consume(self, events: list[ServerSentEvent]) -> list[StreamItem]:
        for event in events:
            if not event.data:
                continue
            try:
                data = json.loads(event.data)
            except ValueError:
                raise ProviderError(
                    f"{self._provider} sent an event that is not JSON: {event.data[:80]!r}",
                    provider=self._provider,
                    code="invalid_stream",
                    retryable=True,
                ) from None
            if type(data) is not dict:
                continue
            kind = data.get("type") or event.event
            try:
                self._event(kind, data)
            except (AttributeError, TypeError, KeyError) as exc:
                raise ProviderError(
                    f"{self._provider} sent an event of an unexpected shape ({exc})",
                    provider=self._provider,
                    code="invalid_stream",
                    retryable=True,
                ) from exc
            if self.stopped:
                break
        return self.drain()

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "content_block_delta":
            delta = data["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                self._append(_TEXT, delta.get("text") or "")
            elif dtype == "thinking_delta":
                self._append(_REASONING, delta.get("thinking") or "")
            elif dtype == "input_json_delta":
                self._tool_piece(data.get("index", 0), delta.get("partial_json") or "")
            elif dtype == "signature_delta" and delta.get("signature"):
                self._switch(0)  # after the thinking it closes
                self._items.append(ReasoningChunk("", signature=str(delta["signature"])))
            # citations_delta: nothing the loop uses
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._tool_start(data.get("index", 0), block)
            elif block.get("type") == "text" and block.get("text"):
                self._append(_TEXT, block["text"])
            elif block.get("type") == "thinking" and block.get("thinking"):
                self._append(_REASONING, block["thinking"])
        elif kind == "message_start":
            self._add_usage((data.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = reason
            self._add_usage(data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.drain()
            raise error_from_body(self._provider, data, redact=self._redact)
        # ping, content_block_stop and unknown events need nothing

    def _append(self, kind: int, text: str) -> None:
        if not text:
            return
        if self._kind != kind:
            self._switch(kind)
        self._buffer.append(text)

    def _tool_start(self, block_index: int, block: dict[str, Any]) -> None:
        ordinal = len(self._blocks)
        self._blocks[block_index] = ordinal
        self._switch(_TOOL)
        self._tool_index = ordinal
        self._tool_head = (block.get("id"), block.get("name"))
        initial = block.get("input")
        if initial:  # normally {} with the arguments following as input_json_delta
            self._buffer.append(json.dumps(initial, ensure_ascii=False))

    def _tool_piece(self, block_index: int, piece: str) -> None:
        ordinal = self._blocks.get(block_index)
        if ordinal is None or not piece:
            return
        if self._kind != _TOOL or self._tool_index != ordinal:
            self._switch(_TOOL)
            self._tool_index = ordinal
        self._buffer.append(piece)

    def _switch(self, kind: int) -> None:
        buffer = self._buffer
        if self._kind == _TEXT:
            self._items.append(TextChunk("".join(buffer)))
            self._answered = True  # _append never buffers empty text
        elif self._kind == _REASONING:
            self._items.append(ReasoningChunk("".join(buffer)))
        elif self._kind == _TOOL:
            call_id, name = self._tool_head
            self._items.append(ToolCallChunk(self._tool_index, call_id, name, "".join(buffer)))
            self._tool_head = (None, None)
            self._answered = True
        self._buffer = []
        self._kind = kind

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key, value in usage.items():
            if type(value) is int:
                self._usage[key] = value  # message_delta counts are cumulative

    def drain(self) -> list[StreamItem]:
        self._switch(0)
        items, self._items = self._items, []
        return items

    def finish(self) -> list[StreamItem]:
        """Usage and StreamEnd, or an error: an incomplete stream, or one with
        neither text nor a tool call (`empty_response`; thinking alone is not an answer)."""
        if not self.stopped and self.stop_reason is None:
            raise ProviderError(
                f"{self._provider} ended the stream before the response was complete",
                provider=self._provider,
                code="incomplete_stream",
                retryable=True,
            )
        items = self.drain()
        if not self._answered:
            raise empty_response_error(self._provider, self.stop_reason)
        if self._usage:
            u = self._usage
            cache_read = u.get("cache_read_input_tokens", 0)
            total_input = u.get("input_tokens", 0) + cache_read
            total_input += u.get("cache_creation_input_tokens", 0)
            items.append(UsageReport(Usage(total_input, u.get("output_tokens", 0), cache_read)))
        items.append(StreamEnd(self.stop_reason))
        return items


# --- the request ------------------------------------------------------------------


def default_max_tokens(model: str) -> int:
    """A max_tokens every model of the family accepts (the API requires one)."""
    name = model.lower()
    if "claude-3-5" in name:
        return 8192
    if "claude-3-" in name and "claude-3-7" not in name:
        return 4096
    return 32000


def build_messages_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a streamed Messages API request; `request.extra` merged last."""
    system = "\n\n".join(
        _text_of(m.content) for m in request.messages if m.role == "system" and _text_of(m.content)
    )
    max_tokens = request.max_tokens or default_max_tokens(request.model)
    thinking = thinking_budget(request.reasoning_effort, max_tokens)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": max_tokens,
        "messages": convert_messages(request.messages, thinking=thinking is not None),
        "stream": True,
    }
    if thinking is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    if system:
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        # A breakpoint after the tools: they lead the cached prefix (tools, system, messages).
        body["tools"][-1]["cache_control"] = _EPHEMERAL
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(request.extra)
    return body


#: Extended thinking's `budget_tokens` per reasoning effort (at least 1,024, and less
#: than the request's max_tokens: a cap too small for the least leaves thinking off).
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10_000, "high": 24_000}


def thinking_budget(effort: str | None, max_tokens: int) -> int | None:
    """The thinking budget for `effort` within `max_tokens`; None: no extended thinking."""
    if not effort or effort not in THINKING_BUDGETS:
        return None
    budget = min(THINKING_BUDGETS[effort], max_tokens - 1024)
    return budget if budget >= 1024 else None


def convert_messages(
    messages: tuple[Message, ...] | list[Message], *, thinking: bool = False
) -> list[dict[str, Any]]:
    """base.Message -> Messages API turns, alternating user/assistant. With `thinking`,
    an assistant turn's signed thinking leads it (the API wants it back with the tool
    calls it led to)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if thinking and message.reasoning and message.reasoning[1]:
            text, signature = message.reasoning
            blocks.insert(0, {"type": "thinking", "thinking": text, "signature": signature})
        if not blocks:
            continue  # the API refuses empty turns (an interrupted empty answer, say)
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            # Tool results must open a user turn; keep them ahead of plain content.
            results = [b for b in previous + blocks if b["type"] == "tool_result"]
            others = [b for b in previous + blocks if b["type"] != "tool_result"]
            turns[-1]["content"] = results + others
        else:
            turns.append({"role": role, "content": blocks})
    if turns:
        last = turns[-1]["content"][-1]
        if last["type"] != "text" or last["text"]:
            last["cache_control"] = _EPHEMERAL
    return turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        content: Any = _content_blocks(message.content) or [{"type": "text", "text": "(empty)"}]
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": content,
            }
        ]
    blocks = _content_blocks(message.content)
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return blocks


def _content_blocks(content: str | tuple[TextPart | ImagePart, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
                }
            )
    return blocks


def _input(arguments: str) -> dict[str, Any]:
    """tool_use input must be an object; keep unparseable arguments visible to the model."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def _text_of(content: str | tuple[TextPart | ImagePart, ...]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))
