"""The OpenAI Responses API over httpx, streamed with SSE (`openai-responses/NAME`).

Request: `POST {base_url}/responses` with `stream: true` and `store: false`
(stateless: every request carries the whole conversation as input items). The
system prompt is the top-level `instructions`; user text is `input_text` (and
images `input_image`), earlier answers are assistant `message` items with
`output_text`, each tool call is a `function_call` item and its result the
`function_call_output` item with the same `call_id`. Images from a tool result
follow the run of outputs as a user message, as in the chat provider.
Reasoning models (o1, o3, o4, gpt-5, codex) are asked for reasoning summaries.

Stream: semantic events, each `{"type": ..., "sequence_number": n}`:
`response.output_text.delta` (answer text), `response.reasoning_summary_text.delta`
and `response.reasoning_text.delta` (reasoning), `response.output_item.added`
with a `function_call` item (call id and name) then
`response.function_call_arguments.delta` / `.done`, and one terminal event:
`response.completed`, `response.incomplete` (the output limit or a content
filter) or `response.failed`; an `error` event fails the stream mid-way. There
is no `[DONE]`. Consecutive deltas of one network read are coalesced.

Usage (from the terminal event): `input_tokens` includes the cached part
(`input_tokens_details.cached_tokens`), `output_tokens` includes reasoning
(`output_tokens_details.reasoning_tokens`), as the chat provider reports them.
`StreamEnd.finish_reason` is "tool_calls" when the answer asked for tools,
"length" when the output limit cut it, else the response's status reason.
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

__all__ = ["ResponsesProvider", "build_responses_body", "convert_input", "usage_from_response"]

_TEXT, _REASONING, _TOOL = 1, 2, 3
_REASONING_MODELS = ("o1", "o3", "o4", "gpt-5", "codex")
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesProvider:
    """A `Provider` for one Responses API endpoint; owns one httpx client."""

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
        self._url = self.base_url + "/responses"
        self._redact = Redactor(api_key)
        self.idle_timeout = idle_timeout
        client_headers = {"Accept": "text/event-stream", "User-Agent": "bastion"}
        if api_key:
            client_headers["Authorization"] = f"Bearer {api_key}"
        client_headers.update(headers or {})
        if timeout is None:
            timeout = stream_timeout(idle_timeout)
        self._client = make_client(self.base_url, client_headers, timeout, transport)

    def __repr__(self) -> str:
        return f"ResponsesProvider(name={self.name!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        body = build_responses_body(request)
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
                state = _ResponseStream(self.name, self._redact)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # A server that ignored `stream: true` and answered at once.
                    for item in state.whole(await response.aread()):
                        yield item
                    return
                async for item in event_items(response, state, self.idle_timeout, self.name):
                    yield item
        except httpx.RequestError as exc:
            raise transport_error(
                self.name, self._url, exc, redact=self._redact, idle=self.idle_timeout
            ) from exc


class _ResponseStream:
    """Turns Responses API stream events into coalesced stream items."""

    def __init__(self, provider: str, redact: Redactor) -> None:
        self._provider = provider
        self._redact = redact
        self._items: list[StreamItem] = []
        self._kind = 0
        self._buffer: list[str] = []
        self._tool_index = -1
        self._tool_head: tuple[str | None, str | None] = (None, None)
        self._calls: dict[int, int] = {}  # output_index -> tool call ordinal
        self._streamed: set[int] = set()  # ordinals whose arguments arrived as deltas
        self._summaries: set[tuple[int, int]] = set()  # (output_index, summary_index) seen
        self._answered = False
        self._usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.stopped = False

    # --- events -------------------------------------------------------------

    def consume(self, events: list[ServerSentEvent]) -> list[StreamItem]:
        for event in events:
            if not event.data or event.data == "[DONE]":
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
            try:
                self._event(str(data.get("type") or event.event), data)
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
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            self._append(_TEXT, data.get("delta") or "")
        elif kind == "response.reasoning_summary_text.delta":
            self._summary_text(data)
        elif kind == "response.reasoning_text.delta":
            self._append(_REASONING, data.get("delta") or "")
        elif kind == "response.function_call_arguments.delta":
            self._arguments(data.get("output_index", 0), data.get("delta") or "")
        elif kind == "response.function_call_arguments.done":
            index = data.get("output_index", 0)
            if self._calls.get(index) not in self._streamed:
                self._arguments(index, data.get("arguments") or "")
        elif kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call":
                self._call_start(data.get("output_index", len(self._calls)), item)
        elif kind in ("response.completed", "response.incomplete"):
            self._terminal(data.get("response") or {})
        elif kind == "response.failed":
            response = data.get("response") or {}
            self.drain()
            error = response.get("error") or {"message": "the response failed"}
            raise error_from_body(self._provider, {"error": error}, redact=self._redact)
        elif kind == "error":
            self.drain()
            fields = {k: v for k, v in data.items() if k not in ("type", "sequence_number")}
            raise error_from_body(self._provider, fields, redact=self._redact)
        # created, in_progress, *.done, content_part.*, summary_part.*: nothing new

    def _summary_text(self, data: dict[str, Any]) -> None:
        key = (data.get("output_index", 0), data.get("summary_index", 0))
        if key not in self._summaries:
            if self._summaries:  # a new summary part: a paragraph break between them
                self._append(_REASONING, "\n\n")
            self._summaries.add(key)
        self._append(_REASONING, data.get("delta") or "")

    def _terminal(self, response: dict[str, Any]) -> None:
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        details = response.get("incomplete_details") or {}
        reason = details.get("reason") if response.get("status") == "incomplete" else None
        if reason:
            self.finish_reason = _INCOMPLETE.get(reason, reason)
        elif self._calls:
            self.finish_reason = "tool_calls"
        else:
            self.finish_reason = "stop"
        self.stopped = True

    def _call_start(self, output_index: int, item: dict[str, Any]) -> None:
        ordinal = len(self._calls)
        self._calls[output_index] = ordinal
        self._switch(_TOOL)
        self._tool_index = ordinal
        self._tool_head = (item.get("call_id") or item.get("id"), item.get("name"))
        initial = item.get("arguments")
        if initial:  # normally "" with the arguments following as deltas
            self._buffer.append(initial)
            self._streamed.add(ordinal)

    def _arguments(self, output_index: int, piece: str) -> None:
        ordinal = self._calls.get(output_index)
        if ordinal is None or not piece:
            return
        self._streamed.add(ordinal)
        if self._kind != _TOOL or self._tool_index != ordinal:
            self._switch(_TOOL)
            self._tool_index = ordinal
        self._buffer.append(piece)

    # --- items --------------------------------------------------------------

    def _append(self, kind: int, text: str) -> None:
        if not text:
            return
        if self._kind != kind:
            self._switch(kind)
        self._buffer.append(text)

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

    def drain(self) -> list[StreamItem]:
        self._switch(0)
        items, self._items = self._items, []
        return items

    def finish(self) -> list[StreamItem]:
        """Usage and StreamEnd, or an error: a stream that ended without its terminal
        event, or one with neither text nor a tool call (`empty_response`)."""
        if not self.stopped:
            raise ProviderError(
                f"{self._provider} ended the stream before the response was complete",
                provider=self._provider,
                code="incomplete_stream",
                retryable=True,
            )
        items = self.drain()
        if not self._answered:
            raise empty_response_error(self._provider, self.finish_reason)
        if self._usage:
            items.append(UsageReport(usage_from_response(self._usage)))
        items.append(StreamEnd(self.finish_reason))
        return items

    def whole(self, payload: bytes) -> list[StreamItem]:
        """A non-streamed response object, read as the events it stands for."""
        try:
            body = json.loads(payload)
        except ValueError as exc:
            raise ProviderError(
                f"{self._provider} sent a response that is not JSON",
                provider=self._provider,
                code="invalid_response",
                retryable=True,
            ) from exc
        if not isinstance(body, dict) or body.get("error"):
            raise error_from_body(self._provider, body, redact=self._redact)
        for index, item in enumerate(body.get("output") or ()):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                for part in item.get("content") or ():
                    if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                        self._append(_TEXT, part.get("text") or part.get("refusal") or "")
            elif item.get("type") == "reasoning":
                for n, part in enumerate(item.get("summary") or ()):
                    if isinstance(part, dict):
                        delta = {"output_index": index, "summary_index": n}
                        self._summary_text({**delta, "delta": part.get("text") or ""})
            elif item.get("type") == "function_call":
                self._call_start(index, item)
        self._terminal(body)
        return [*self.drain(), *self.finish()]


def usage_from_response(usage: Mapping[str, Any]) -> Usage:
    """Usage from a Responses API `usage` object."""
    inputs = usage.get("input_tokens_details") or {}
    outputs = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cached_input_tokens=_int(inputs.get("cached_tokens")),
        reasoning_tokens=_int(outputs.get("reasoning_tokens")),
    )


def _int(value: Any) -> int:
    return value if type(value) is int else 0


# --- the request ------------------------------------------------------------------


def _is_reasoning_model(model: str) -> bool:
    name = model.lower().rsplit("/", 1)[-1]
    return name.startswith(_REASONING_MODELS)


def build_responses_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a streamed Responses API request; `request.extra` merged last."""
    instructions = "\n\n".join(
        text for m in request.messages if m.role == "system" and (text := _text_of(m.content))
    )
    body: dict[str, Any] = {
        "model": request.model,
        "input": convert_input(request.messages),
        "stream": True,
        "store": False,
    }
    if instructions:
        body["instructions"] = instructions
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in request.tools
        ]
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.reasoning_effort:
        body["reasoning"] = {"effort": request.reasoning_effort, "summary": "auto"}
    elif _is_reasoning_model(request.model):
        body["reasoning"] = {"summary": "auto"}
    if request.session_id:
        body["prompt_cache_key"] = request.session_id
    body.update(request.extra)
    return body


def convert_input(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    """base.Message -> Responses API input items (system messages go to `instructions`)."""
    items: list[dict[str, Any]] = []
    pending_images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and pending_images:
            items.append({"role": "user", "content": pending_images})
            pending_images = []
        if message.role == "system":
            continue
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            text = _text_of(message.content)
            items.append({"type": "function_call_output", "call_id": call_id, "output": text})
            images = _images(message.content)
            if images:
                pending_images.append(
                    {"type": "input_text", "text": f"Images from tool result {call_id}:"}
                )
                pending_images.extend(images)
        elif message.role == "assistant":
            text = _text_of(message.content)
            if text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }
                )
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments or "{}",
                }
                for call in message.tool_calls
            )
        else:
            items.append({"role": "user", "content": _user_content(message.content)})
    if pending_images:
        items.append({"role": "user", "content": pending_images})
    return items


def _user_content(content: str | tuple[TextPart | ImagePart, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            parts.append({"type": "input_text", "text": part.text})
        else:
            parts.append(_image(part))
    return parts


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "input_image", "image_url": f"data:{part.media_type};base64,{part.data}"}


def _images(content: str | tuple[TextPart | ImagePart, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return []
    return [_image(p) for p in content if isinstance(p, ImagePart)]


def _text_of(content: str | tuple[TextPart | ImagePart, ...]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))
