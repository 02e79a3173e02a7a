"""The provider seam: what the model loop sends and what a provider streams back.

Everything here is plain frozen data. A provider turns a `ModelRequest` into an
async stream of `StreamItem`s and raises `ProviderError` for anything that went
wrong on the wire; the model loop decides what to retry and what to show.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class TextPart(msgspec.Struct, frozen=True):
    text: str


class ImagePart(msgspec.Struct, frozen=True):
    """An image the model should see; `data` is base64 without a data: prefix."""

    media_type: str
    data: str


ContentPart = TextPart | ImagePart


class ToolCall(msgspec.Struct, frozen=True):
    """A complete tool call the model asked for; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


class Message(msgspec.Struct, frozen=True):
    role: Role
    content: str | tuple[ContentPart, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    # An assistant turn's thinking and its provider signature (Anthropic wants them
    # back with the tool calls they led to while extended thinking is on).
    reasoning: tuple[str, str] | None = None


class ToolSpec(msgspec.Struct, frozen=True):
    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(msgspec.Struct, frozen=True):
    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    session_id: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    # How hard a reasoning model thinks (runtime.run.reasoning.EFFORTS); None: its default.
    reasoning_effort: str | None = None


# --- what a stream yields -------------------------------------------------


class TextChunk(msgspec.Struct, frozen=True):
    """Answer text. A provider coalesces consecutive deltas of one network read."""

    text: str


class ReasoningChunk(msgspec.Struct, frozen=True):
    text: str
    signature: str = ""  # Anthropic: the signature that closes a thinking block


class ToolCallChunk(msgspec.Struct, frozen=True):
    """A piece of tool call `index`: id and name arrive once, arguments in pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Usage(msgspec.Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = (
            None
            if self.cost is None and other.cost is None
            else ((self.cost or 0.0) + (other.cost or 0.0))
        )
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            cost,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost": self.cost,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        if not data:
            return cls()
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cached_input_tokens", 0)),
            int(data.get("reasoning_tokens", 0)),
            data.get("cost"),
        )


class UsageReport(msgspec.Struct, frozen=True):
    usage: Usage


class StreamEnd(msgspec.Struct, frozen=True):
    """The provider finished the response; `finish_reason` as the wire said it."""

    finish_reason: str | None


StreamItem = TextChunk | ReasoningChunk | ToolCallChunk | UsageReport | StreamEnd


class ProviderError(Exception):
    """Anything that went wrong talking to a provider, with structured fields.

    `retryable` is true for connect errors, 408, 409, 429, 5xx, silent and empty
    streams; `retry_after` is the server's Retry-After in seconds when it sent
    one; `retry_limit`, when set, caps how many times this kind of failure is
    worth retrying whatever the loop's own limit (an empty answer: once).
    `reason` is a few words for a person ("rate limited", "no data for 90 s"),
    short enough for "retrying in 4 s (reason)".
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        code: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        retry_limit: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after
        self.retry_limit = retry_limit
        self.reason = reason or default_reason(status, code)

    def is_context_overflow(self) -> bool:
        """The prompt did not fit the model's window (OpenAI `context_length_exceeded`,
        Anthropic "prompt is too long", llama.cpp `exceed_context_size_error`, vLLM and
        OpenRouter "maximum context length"): the loop compacts and retries once."""
        text = f"{self.code or ''} {self.message}".lower()
        return self.code in _OVERFLOW_CODES or any(p in text for p in _OVERFLOW_PHRASES)

    def is_auth(self) -> bool:
        return self.status in (401, 403)

    def is_idle_timeout(self) -> bool:
        return self.code == IDLE_TIMEOUT

    def is_empty_response(self) -> bool:
        return self.code == EMPTY_RESPONSE

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code
            or ("provider_http_" + str(self.status) if self.status else "provider"),
            "message": self.message,
            "reason": self.reason,
            "provider": self.provider,
            "status": self.status,
            "retryable": self.retryable,
        }


_OVERFLOW_CODES = ("context_length_exceeded", "exceed_context_size_error")
_OVERFLOW_PHRASES = (
    "context length",
    "maximum context",
    "prompt is too long",
    "exceeds the available context size",
    "context window",
)

#: Codes of the failures the stream itself detects (not the server).
IDLE_TIMEOUT = "idle_timeout"
EMPTY_RESPONSE = "empty_response"

_REASONS = {
    "connect_error": "cannot connect",
    "connect_timeout": "connecting timed out",
    "pool_timeout": "no free connection",
    "timeout": "timed out",
    "connection_lost": "connection lost",
    "invalid_stream": "malformed stream",
    "invalid_response": "malformed response",
    "incomplete_stream": "stream ended early",
    "stream_error": "error mid-stream",
    "server_error": "server error",
    "internal_error": "server error",
    "api_error": "server error",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate limited",
    "rate_limit_exceeded": "rate limited",
    "service_unavailable": "service unavailable",
    "context_length_exceeded": "prompt too long",
    EMPTY_RESPONSE: "empty answer",
    IDLE_TIMEOUT: "no data",
}


def default_reason(status: int | None, code: str | None) -> str:
    """A few words for a ProviderError that was not given its own reason."""
    if code in _REASONS:
        return _REASONS[code]
    if status == 429:
        return "rate limited"
    if status == 408:
        return "request timed out"
    if status is not None and status >= 500:
        return f"server error (HTTP {status})"
    if status is not None:
        return f"HTTP {status}"
    return code.replace("_", " ") if code else "provider error"


class Provider(Protocol):
    """A model provider. `stream` raises ProviderError; it never returns errors as items."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]: ...

    async def aclose(self) -> None: ...
