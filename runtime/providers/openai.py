"""OpenAI-compatible chat completions over httpx, streamed with SSE.

Works against OpenAI, OpenRouter, Ollama, llama.cpp, vLLM and anything else that
speaks `POST /chat/completions` with `stream: true`.

Streaming is built for many tiny events: a long answer can arrive as tens of
thousands of `data:` lines. Each network read is parsed as a whole (the JSON of
all its events decoded in one call), and consecutive text deltas of one read,
like consecutive reasoning deltas and argument pieces of one tool call, are
coalesced, so the model loop sees about one item per read rather than one per
token.

Usage: `input_tokens` is the wire's `prompt_tokens`, which *includes* cached
tokens (`cached_input_tokens` is the cached part of it); `output_tokens` is
`completion_tokens`, which includes reasoning tokens.
"""

from __future__ import annotations

import json
import re
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
from runtime.providers.sse import DataBatch, ServerSentEvent

__all__ = ["OpenAIChatProvider", "build_chat_body", "convert_messages", "usage_from_wire"]

_TEXT, _REASONING, _TOOL = 1, 2, 3


class OpenAIChatProvider:
    """A `Provider` for one OpenAI-compatible endpoint; owns one httpx client."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_tokens_field: str = "max_tokens",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._url = self.base_url + "/chat/completions"
        self._max_tokens_field = max_tokens_field
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
        return f"OpenAIChatProvider(name={self.name!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        body = build_chat_body(request, max_tokens_field=self._max_tokens_field)
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
                content_type = response.headers.get("content-type", "")
                if content_type.startswith("application/json"):
                    # A server that ignored `stream: true` and answered at once.
                    for item in self._whole_response(await response.aread()):
                        yield item
                    return
                state = _ChatStream(self.name, self._redact)
                items = event_items(response, state, self.idle_timeout, self.name, batched=True)
                async for item in items:
                    yield item
        except httpx.RequestError as exc:
            raise transport_error(
                self.name, self._url, exc, redact=self._redact, idle=self.idle_timeout
            ) from exc

    def _whole_response(self, payload: bytes) -> list[StreamItem]:
        try:
            body = json.loads(payload)
        except ValueError as exc:
            raise ProviderError(
                f"{self.name} sent a response that is not JSON",
                provider=self.name,
                code="invalid_response",
                retryable=True,
            ) from exc
        if not isinstance(body, dict) or body.get("error"):
            raise error_from_body(self.name, body, redact=self._redact)
        state = _ChatStream(self.name, self._redact)
        choices = body.get("choices") or [{}]
        choice = choices[0] if isinstance(choices, list) and isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        # The same shapes as a stream: one delta carrying the whole message.
        whole = {"delta": message, "finish_reason": choice.get("finish_reason")}
        state.consume_checked([{"choices": [whole], "usage": body.get("usage")}])
        state.stopped = True
        return [*state.drain(), *state.finish()]


class _ChatStream:
    """Turns parsed chat.completion.chunk objects into coalesced stream items."""

    __slots__ = (
        "_answered",
        "_buffer",
        "_items",
        "_kind",
        "_named",
        "_provider",
        "_redact",
        "_remap",
        "_sent_ids",
        "_tool_id",
        "_tool_ids",
        "_tool_index",
        "_tool_name",
        "finish_reason",
        "stopped",
        "usage",
    )

    def __init__(self, provider: str, redact: Redactor) -> None:
        self._provider = provider
        self._redact = redact
        self._items: list[StreamItem] = []
        self._kind = 0
        self._buffer: list[str] = []
        self._tool_index = -1
        self._tool_id: str | None = None
        self._tool_name: str | None = None
        self._tool_ids: dict[int, str | None] = {}  # our index -> id it was announced with
        self._named: set[int] = set()  # indices whose name was sent
        self._sent_ids: set[int] = set()  # indices whose id was sent
        self._remap: dict[int, int] = {}  # wire index -> our index, when a server reuses one
        self._answered = False  # any answer text or tool call yet
        self.stopped = False  # [DONE] or a finish seen: the rest is drained
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def consume(self, events: DataBatch | list[ServerSentEvent]) -> list[StreamItem]:
        if isinstance(events, DataBatch):
            objects = self._batch_objects(events)
        else:
            objects = self._event_objects(events)
        if objects:
            self.consume_checked(objects)
        return self.drain()

    def consume_checked(self, objects: list[Any]) -> None:
        """`consume_objects`, with a malformed chunk turned into a ProviderError."""
        try:
            self.consume_objects(objects)
        except (AttributeError, TypeError, IndexError, KeyError) as exc:
            raise ProviderError(
                f"{self._provider} sent a chunk of an unexpected shape ({exc})",
                provider=self._provider,
                code="invalid_stream",
                retryable=True,
            ) from exc

    def _batch_objects(self, batch: DataBatch | None) -> list[Any]:
        if batch is not None and batch.raw.endswith(b"[DONE]") and batch.last() == b"[DONE]":
            self.stopped = True
            batch = batch.without_last()
        if batch is None:
            return []
        if batch.count >= _UNIFORM_MIN and self._uniform_deltas(batch):
            return []
        try:
            objects = json.loads(batch.json_array())
        except ValueError:
            objects = None
        if type(objects) is list and len(objects) == batch.count:
            return objects
        # Some payload was not plain JSON: go through them one at a time.
        payloads = [p.decode("utf-8", "replace") for p in batch.payloads()]
        return _loads_many(self._provider, [p for p in payloads if p])

    def _uniform_deltas(self, batch: DataBatch) -> bool:
        """Take a batch of text (or reasoning) deltas without parsing every event.

        Servers repeat one envelope (id, model, created, ...) around each delta, so
        a batch of plain deltas is `P + string + S` over and over. The first event
        is parsed in full and must be nothing but one text or reasoning delta;
        then every event boundary must read `S + separator + P`, and what is left
        between them must parse as exactly one JSON string per event. Then the
        events mean what the first one means, with their own text. Anything else
        (a role, a finish reason, tool calls, usage, a changing envelope) returns
        False and the batch is parsed event by event.
        """
        raw = batch.raw
        first_end = raw.find(_SEPARATOR)
        found = _DELTA_KEY.search(raw, 0, first_end)
        if found is None:
            return False
        value = _JSON_STRING.match(raw, found.end())
        if value is None:
            return False
        prefix, suffix = raw[: found.end()], raw[value.end() : first_end]
        if not raw.endswith(suffix):
            return False
        boundary = suffix + _SEPARATOR + prefix
        if raw.count(boundary) != batch.count - 1:
            return False
        try:
            kind = _plain_delta(json.loads(raw[:first_end]))
            middle = raw[len(prefix) : len(raw) - len(suffix)].replace(boundary, b",")
            pieces = json.loads(b"[" + middle + b"]")
            if kind == 0 or type(pieces) is not list or len(pieces) != batch.count:
                return False
            text = "".join(pieces)  # a TypeError unless every piece is a string
        except (ValueError, TypeError):
            return False
        if self._kind != kind:
            self._switch(kind)
        self._buffer.append(text)
        return True

    def _event_objects(self, events: list[ServerSentEvent]) -> list[Any]:
        payloads: list[str] = []
        for event in events:
            data = event.data
            if data == "[DONE]":
                self.stopped = True
                break
            if event.event == "error":
                self._raise_error(_loads_one(self._provider, data, strict=False) or {"error": data})
            if data:
                payloads.append(data)
        return _loads_many(self._provider, payloads) if payloads else []

    def consume_objects(self, objects: list[Any]) -> None:
        for obj in objects:
            if type(obj) is not dict:
                continue
            if obj.get("error"):
                self._raise_error(obj)
            choices = obj.get("choices")
            if choices:
                choice = choices[0]
                delta = choice.get("delta")
                if delta:
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning and type(reasoning) is str:
                        if self._kind != _REASONING:
                            self._switch(_REASONING)
                        self._buffer.append(reasoning)
                    content = delta.get("content")
                    if content:
                        if self._kind != _TEXT:
                            self._switch(_TEXT)
                        self._buffer.append(content)
                    calls = delta.get("tool_calls")
                    if calls:
                        self._tool_calls(calls)
                reason = choice.get("finish_reason")
                if reason:
                    self.finish_reason = reason
            usage = obj.get("usage")
            if usage:
                self.usage = usage

    def drain(self) -> list[StreamItem]:
        self._switch(0)
        items, self._items = self._items, []
        return items

    def finish(self) -> list[StreamItem]:
        """The tail of a stream that ended: usage and StreamEnd, or an error.

        A response with neither answer text nor a tool call (reasoning alone
        does not count) is an `empty_response` error, not an empty answer.
        """
        if not self.stopped and self.finish_reason is None:
            raise ProviderError(
                f"{self._provider} ended the stream before the response was complete",
                provider=self._provider,
                code="incomplete_stream",
                retryable=True,
            )
        items = self.drain()
        if not self._answered:
            raise empty_response_error(self._provider, self.finish_reason)
        if self.usage:
            items.append(UsageReport(usage_from_wire(self.usage)))
        items.append(StreamEnd(self.finish_reason))
        return items

    def _switch(self, kind: int) -> None:
        """Flush what is buffered as one item, then start buffering `kind`."""
        buffer = self._buffer
        if self._kind == _TEXT:
            text = buffer[0] if len(buffer) == 1 else "".join(buffer)
            self._items.append(TextChunk(text))
            self._answered = self._answered or bool(text)
        elif self._kind == _REASONING:
            self._items.append(ReasoningChunk(buffer[0] if len(buffer) == 1 else "".join(buffer)))
        elif self._kind == _TOOL:
            self._items.append(
                ToolCallChunk(self._tool_index, self._tool_id, self._tool_name, "".join(buffer))
            )
            self._answered = True
            self._tool_id = self._tool_name = None
        if buffer:
            self._buffer = []
        self._kind = kind

    def _tool_calls(self, calls: list[Any]) -> None:
        for position, call in enumerate(calls):
            if type(call) is not dict:
                continue
            index = self._index(call, position)
            function = call.get("function") or {}
            if self._kind != _TOOL or self._tool_index != index:
                self._switch(_TOOL)
                self._tool_index = index
            if index not in self._sent_ids:
                call_id = call.get("id")
                if call_id:
                    self._tool_id = call_id
                    self._sent_ids.add(index)
            if index not in self._named:
                name = function.get("name")
                if name:
                    self._tool_name = name
                    self._named.add(index)
            arguments = function.get("arguments")
            if arguments:
                if type(arguments) is not str:  # some servers send an object
                    arguments = json.dumps(arguments, ensure_ascii=False)
                self._buffer.append(arguments)

    def _index(self, call: dict[str, Any], position: int) -> int:
        wire = call.get("index")
        if type(wire) is not int:
            wire = position
        call_id = call.get("id")
        index = self._remap.get(wire, wire)
        if call_id:
            known = self._tool_ids.get(index)
            if index in self._tool_ids and known and known != call_id:
                # The server reused an index for a new call: give it a fresh one.
                index = max(self._tool_ids) + 1
                self._remap[wire] = index
            if self._tool_ids.get(index) is None:
                self._tool_ids[index] = call_id
        elif index not in self._tool_ids:
            self._tool_ids[index] = None
        return index

    def _raise_error(self, body: Any) -> None:
        self.drain()
        raise error_from_body(self._provider, body, redact=self._redact)


_SEPARATOR = b"\n\ndata: "
_UNIFORM_MIN = 8  # below this many events a batch is parsed event by event
_DELTA_KEY = re.compile(rb'"delta":\s*\{\s*"(?:content|reasoning_content|reasoning)":\s*')
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _plain_delta(obj: Any) -> int:
    """_TEXT or _REASONING when `obj` is a chunk with one text or reasoning delta, else 0."""
    if type(obj) is not dict or obj.get("error") or obj.get("usage"):
        return 0
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return 0
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("finish_reason") or type(delta) is not dict or len(delta) != 1:
        return 0
    if type(delta.get("content")) is str:
        return _TEXT
    if type(delta.get("reasoning_content") or delta.get("reasoning")) is str:
        return _REASONING
    return 0


def _loads_one(provider: str, data: str, *, strict: bool = True) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        if not strict:
            return None
        raise ProviderError(
            f"{provider} sent an event that is not JSON: {data[:80]!r}",
            provider=provider,
            code="invalid_stream",
            retryable=True,
        ) from None


def _loads_many(provider: str, payloads: list[str]) -> list[Any]:
    """Decode the JSON of many events with one parser call where possible."""
    if len(payloads) == 1:
        return [_loads_one(provider, payloads[0])]
    try:
        objects = json.loads("[" + ",".join(payloads) + "]")
    except ValueError:
        objects = None
    if type(objects) is list and len(objects) == len(payloads):
        return objects
    return [_loads_one(provider, data) for data in payloads]


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Usage from an OpenAI-style `usage` object (OpenRouter adds `cost`)."""
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cost = usage.get("cost")
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cached_input_tokens=_int(prompt_details.get("cached_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
    )


def _int(value: Any) -> int:
    return value if type(value) is int else 0


# --- the request ------------------------------------------------------------


def build_chat_body(
    request: ModelRequest, *, max_tokens_field: str = "max_tokens"
) -> dict[str, Any]:
    """The JSON body of a streamed chat completion for `request`.

    `request.extra` is merged last, so a caller can set fields this module does
    not know (`reasoning_effort`, `max_completion_tokens`, provider routing, …).
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": convert_messages(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.reasoning_effort:
        body["reasoning_effort"] = request.reasoning_effort
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if request.max_tokens is not None:
        body[max_tokens_field] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    body.update(request.extra)
    return body


def convert_messages(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    """base.Message -> chat completion messages.

    Tool results can only carry text on this wire, so images in a tool result go
    to a user message placed right after the run of tool messages it belongs to
    (a user message between tool messages of one batch is refused by OpenAI).
    """
    out: list[dict[str, Any]] = []
    pending_images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and pending_images:
            out.append({"role": "user", "content": pending_images})
            pending_images = []
        if message.role == "tool":
            text, images = _split_parts(message.content)
            out.append(
                {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": text}
            )
            if images:
                pending_images.append(
                    {"type": "text", "text": f"Images from tool result {message.tool_call_id}:"}
                )
                pending_images.extend(images)
        elif message.role == "assistant":
            text, _ = _split_parts(message.content)
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if message.tool_calls:
                entry["content"] = text or None
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments or "{}"},
                    }
                    for call in message.tool_calls
                ]
            out.append(entry)
        elif message.role == "user" and not isinstance(message.content, str):
            out.append({"role": "user", "content": [_part(p) for p in message.content]})
        else:
            text, _ = _split_parts(message.content)
            out.append({"role": message.role, "content": text})
    if pending_images:
        out.append({"role": "user", "content": pending_images})
    return out


def _part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{part.media_type};base64,{part.data}"},
    }


def _split_parts(
    content: str | tuple[TextPart | ImagePart, ...],
) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(content, str):
        return content, []
    texts = [p.text for p in content if isinstance(p, TextPart)]
    images = [_part(p) for p in content if isinstance(p, ImagePart)]
    return "\n".join(texts), images
