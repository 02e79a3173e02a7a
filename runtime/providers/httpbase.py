"""What every HTTP provider shares: the client, error classification, Retry-After,
redaction, the idle watchdog, and reading a finished response to its end.

Providers never retry a stream themselves; they turn whatever went wrong into a
`ProviderError` whose `retryable` and `retry_after` the model loop acts on.
Retryable: connect errors, timeouts, connections dropped mid-response, silent
streams, empty answers (once), and the HTTP statuses 408, 409, 429 (unless it
says the quota is gone) and 5xx.

The idle watchdog: from sending a request to its response headers, and then
from one piece of model data to the next, at most `idle` seconds may be spent
waiting (default 90 s, `stream_idle_timeout` in config.toml). Model data is an
event with data in it; keep-alives are not: a server's comments (`: ping`,
OpenRouter's `: OPENROUTER PROCESSING`) and Anthropic's `ping` events prove the
connection is up, not that the model is getting anywhere, so a server that
sends nothing else is dropped after `idle` seconds like a silent one (a model
that really thinks longer than that before its first token needs a longer
`stream_idle_timeout`). Time the consumer spends between reads is not
counted. When it fires the request is dropped with a retryable `idle_timeout`
error, so the loop retries it and, past its retries, fails the run with that
one line. httpx's own timeouts are kept at or just above it: its read timeout is
only a backstop, and connecting may not take longer than the idle time either.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

import httpx

from runtime.model.llm import EMPTY_RESPONSE, IDLE_TIMEOUT, ProviderError
from runtime.providers.sse import DataBatch, SSEDecoder

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "RETRYABLE_STATUSES",
    "IdleGuard",
    "LazyClient",
    "Redactor",
    "drain",
    "empty_response_error",
    "error_from_body",
    "event_items",
    "idle_timeout_error",
    "is_loopback_url",
    "local_server_hint",
    "make_client",
    "open_stream",
    "parse_retry_after",
    "status_error",
    "stream_timeout",
    "transport_error",
]

#: The longest silence tolerated from a streaming model, in seconds.
DEFAULT_IDLE_TIMEOUT = 90.0


def stream_timeout(idle: float) -> httpx.Timeout:
    """httpx timeouts that never outlast the idle watchdog pointlessly.

    Connect quickly or fail (15 s, less if the idle time is shorter); the read
    timeout is a backstop one second past the watchdog, which fires first with
    the clearer error; a write may stall no longer than a read.
    """
    quick = min(15.0, idle)
    return httpx.Timeout(connect=quick, read=idle + 1.0, write=min(60.0, idle), pool=quick)


DEFAULT_TIMEOUT = stream_timeout(DEFAULT_IDLE_TIMEOUT)


def _seconds(value: float) -> str:
    return f"{value:g} s"


def idle_timeout_error(provider: str, seconds: float) -> ProviderError:
    """The retryable error of a stream that stayed silent for `seconds`."""
    return ProviderError(
        f"no data from {provider} for {_seconds(seconds)} (the stream went silent or sent only keep-alives)",
        provider=provider,
        code=IDLE_TIMEOUT,
        retryable=True,
        reason=f"no data for {_seconds(seconds)}",
    )


#: How often an empty answer is worth asking again for: a model that ends a turn
#: with nothing usually answers the second time, and rarely the third.
EMPTY_RESPONSE_RETRIES = 1


def empty_response_error(provider: str, finish_reason: str | None) -> ProviderError:
    """The error of a response that ended with no text and no tool call.

    Retried once (`retry_limit`), unless the response says why it is empty: the
    output limit was spent (on reasoning, say) or a content filter withheld it,
    which asking again would only repeat.
    """
    if finish_reason in ("length", "max_tokens"):
        return ProviderError(
            f"{provider} spent its whole output limit before answering (finish reason "
            f"{finish_reason!r}): raise the output limit or ask for a smaller step",
            provider=provider,
            code=EMPTY_RESPONSE,
            reason="output limit reached with no answer",
        )
    if finish_reason in ("content_filter", "refusal"):
        return ProviderError(
            f"{provider} withheld its answer (finish reason {finish_reason!r})",
            provider=provider,
            code=EMPTY_RESPONSE,
            reason="answer withheld",
        )
    said = f", finish reason {finish_reason!r}" if finish_reason else ""
    return ProviderError(
        f"{provider} sent an empty answer (no text and no tool call{said})",
        provider=provider,
        code=EMPTY_RESPONSE,
        retryable=True,
        retry_limit=EMPTY_RESPONSE_RETRIES,
        reason="empty answer",
    )


class IdleGuard:
    """The body's reads, at most `seconds` of waiting from one `progress()` to the next;
    past that, `idle_timeout`.

    Only the waits for reads are timed, never what the consumer does with a
    chunk between reads; a read that brought only keep-alives is waited for but
    is no progress. `reads` is the unguarded iterator (for `drain`).
    """

    __slots__ = ("_provider", "_seconds", "_waited", "reads")

    def __init__(self, reads: AsyncIterator[bytes], seconds: float, provider: str) -> None:
        self.reads = reads
        self._seconds = seconds
        self._provider = provider
        self._waited = 0.0  # seconds spent waiting for reads since the last progress

    def progress(self) -> None:
        """Model data arrived: the next piece has `seconds` again."""
        self._waited = 0.0

    def __aiter__(self) -> IdleGuard:
        return self

    async def __anext__(self) -> bytes:
        scope = asyncio.timeout(max(self._seconds - self._waited, 0.0))
        started = time.monotonic()
        try:
            async with scope:
                return await anext(self.reads)
        except TimeoutError:
            if scope.expired():
                raise idle_timeout_error(self._provider, self._seconds) from None
            raise
        finally:
            self._waited += time.monotonic() - started


@contextlib.asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient | LazyClient, url: str, body: Any, *, idle: float, provider: str
) -> AsyncIterator[httpx.Response]:
    """POST `body` and yield the streaming response once its headers arrived,
    waiting at most `idle` seconds for them."""
    async with contextlib.AsyncExitStack() as stack:
        scope = asyncio.timeout(idle)
        try:
            async with scope:
                response = await stack.enter_async_context(client.stream("POST", url, json=body))
        except TimeoutError:
            if scope.expired():
                raise idle_timeout_error(provider, idle) from None
            raise
        yield response


RETRYABLE_STATUSES = frozenset({408, 409, 429})

# Error codes/types a server sends for conditions that pass on their own.
_TRANSIENT_CODES = frozenset(
    {
        "server_error",
        "internal_error",
        "api_error",
        "overloaded",
        "overloaded_error",
        "rate_limit_exceeded",
        "rate_limit_error",
        "timeout",
        "service_unavailable",
    }
)
# 429s that will not pass by waiting.
_PERMANENT_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})

# How servers say "the prompt does not fit": OpenAI, vLLM, OpenRouter, Anthropic,
# llama.cpp, Ollama, Mistral, Groq. Matched only on 400/413/422 bodies.
_OVERFLOW = re.compile(
    r"context length|context window|maximum context|prompt is too long|"
    r"exceeds the (?:available )?context|too many tokens|reduce the length of the messages",
    re.IGNORECASE,
)
_SECRET_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6})[A-Za-z0-9_\-]{8,}")
_MAX_MESSAGE = 500


class Redactor:
    """Removes an API key (and anything shaped like one) from text shown to people."""

    __slots__ = ("_secrets",)

    def __init__(self, *secrets: str | None) -> None:
        self._secrets = tuple(s for s in secrets if s and len(s) >= 4)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return _SECRET_PATTERN.sub(r"\1…[redacted]", text)


def is_loopback_url(url: str) -> bool:
    """True for URLs on localhost, 127.0.0.0/8 or ::1."""
    try:
        host = httpx.URL(url).host
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LazyClient:
    """An `httpx.AsyncClient` made on first use.

    Making one builds an SSL context, which loads the CA bundle (about 100 ms of
    CPU): a session that is opened, looked at and closed never pays it, and the
    app's first frame does not wait for it. Attributes are the client's.
    """

    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        self._make = make
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self._make()
        return self._client

    def stream(self, method: str, url: str, **kwargs: Any) -> Any:
        return self.client.stream(method, url, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def make_client(
    base_url: str,
    headers: Mapping[str, str],
    timeout: float | httpx.Timeout,
    transport: httpx.AsyncBaseTransport | None,
) -> LazyClient:
    """The provider's client, made on first use. Redirects are reported, not followed
    (a POST must not silently become a GET). A loopback server is never reached
    through an HTTP(S)_PROXY from the environment: no proxy can reach this machine's
    loopback, and httpx does not exempt localhost unless NO_PROXY says so. A plain
    http:// URL never does TLS, so its client skips loading the CA bundle."""
    plain = httpx.URL(base_url).scheme == "http"

    def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=dict(headers),
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            trust_env=not is_loopback_url(base_url),
            verify=not plain,
        )

    return LazyClient(make)


class EventState(Protocol):
    """A provider's stream state: SSE events in, stream items out."""

    stopped: bool

    def consume(self, events: Any) -> list[Any]: ...  # SSE events (or a DataBatch, batched)

    def finish(self) -> list[Any]: ...


async def event_items(
    response: httpx.Response,
    state: EventState,
    idle: float,
    provider: str,
    *,
    batched: bool = False,
) -> AsyncIterator[Any]:
    """The items `state` makes of a streaming response's server-sent events, each chunk
    read within `idle` seconds; once `state.stopped`, the rest of the body is drained
    (so the connection goes back to the pool) and not read as events. `batched`: hand
    `state` the decoder's `DataBatch` fast path (OpenAI-compatible chunks)."""
    decoder = SSEDecoder()
    feed = decoder.feed_batch if batched else decoder.feed
    reads = IdleGuard(response.aiter_bytes(), idle, provider)
    async for chunk in reads:
        events = feed(chunk)
        if events:
            if isinstance(events, DataBatch) or any(e.event != "ping" for e in events):
                reads.progress()  # comments never make an event; `ping` events are no news
            for item in state.consume(events):
                yield item
            if state.stopped:
                await drain(reads.reads)
                break
    else:
        for item in state.consume(decoder.close()):
            yield item
    for item in state.finish():
        yield item


async def drain(reads: AsyncIterator[bytes], *, seconds: float = 0.5) -> None:
    """Read what follows the end of a stream (normally just the end of the body), briefly.

    A response read to its end returns its connection to the pool, so the next
    request of the conversation skips a new TCP and TLS handshake.
    """
    try:
        async with asyncio.timeout(seconds):
            async for _ in reads:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass  # then the connection is simply not reused


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            pass
        else:
            if value >= 0 and value == value:  # not NaN
                return value
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        current = time.time() if now is None else now
        return max(0.0, when.timestamp() - current)
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return seconds


def _error_fields(body: Any) -> tuple[str | None, str | None, int | None]:
    """(message, code, numeric code) from `{"error": {...}}` or `{"error": "text"}`."""
    if not isinstance(body, dict):
        return None, None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return error, None, None
    if not isinstance(error, dict):
        return None, None, None
    message = error.get("message")
    raw_code = error.get("code")
    kind = error.get("type")
    code: str | None = None
    number: int | None = None
    if isinstance(raw_code, str) and raw_code:
        code = raw_code
    elif isinstance(raw_code, int) and not isinstance(raw_code, bool):
        number = raw_code
    if code is None and isinstance(kind, str) and kind:
        code = kind
    text = message if isinstance(message, str) and message else None
    return text, code, number


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def status_error(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    redact: Redactor,
) -> ProviderError:
    """The ProviderError for a non-2xx response, its JSON error body parsed."""
    message: str | None = None
    code: str | None = None
    try:
        parsed = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        parsed = None
    if parsed is not None:
        message, code, _ = _error_fields(parsed)
    if message is None and body:
        text = body.decode("utf-8", "replace").strip()
        if text and not text.lstrip().startswith("<"):  # skip HTML error pages
            message = text
    if message is None:
        try:
            message = httpx.codes.get_reason_phrase(status) or "error"
        except ValueError:
            message = "error"
    retryable = status in RETRYABLE_STATUSES or status >= 500
    if code in _PERMANENT_CODES:
        retryable = False
    if 300 <= status < 400 and headers.get("location"):
        message += f" (redirected to {headers['location']}; check the base URL)"
    generic = code in (None, "invalid_request_error", "invalid_request")
    if status in (400, 413, 422) and generic and _OVERFLOW.search(message):
        code = "context_length_exceeded"
    return ProviderError(
        redact(f"{provider} returned HTTP {status}: {_clip(message)}"),
        provider=provider,
        status=status,
        code=code,
        retryable=retryable,
        retry_after=parse_retry_after(headers) if retryable else None,
    )


def error_from_body(provider: str, body: Any, *, redact: Redactor) -> ProviderError:
    """The ProviderError for an error object sent inside an event stream."""
    message, code, number = _error_fields(body)
    status = number if number is not None and 100 <= number <= 599 else None
    retryable = (code in _TRANSIENT_CODES) or (
        status is not None and (status in RETRYABLE_STATUSES or status >= 500)
    )
    if code is None and status is None:
        retryable = True  # an unexplained failure mid-stream: worth another try
    return ProviderError(
        redact(f"{provider} reported an error mid-stream: {_clip(message or 'unknown error')}"),
        provider=provider,
        status=status,
        code=code or "stream_error",
        retryable=retryable,
    )


#: How often a refused connection to a loopback server is retried.
LOCAL_CONNECT_RETRIES = 1
_START_HINTS = {
    "ollama": "is Ollama running? Start it with `ollama serve`",
    "llamacpp": "is llama.cpp's server running? Start it with `llama-server -m MODEL.gguf`",
}


def local_server_hint(provider: str) -> str:
    """What to start when nothing listens at a local provider's address."""
    return _START_HINTS.get(
        provider, f"is the {provider} server running? Start it, or check its base_url"
    )


def transport_error(
    provider: str,
    url: str,
    exc: httpx.RequestError,
    *,
    redact: Redactor,
    idle: float | None = None,
) -> ProviderError:
    """The ProviderError for a failure below HTTP: connect, timeout, dropped connection.

    A read timeout is a silent stream: with `idle` (the watchdog's seconds) it
    is reported as `idle_timeout`, naming the shorter of the two.
    """
    if isinstance(exc, httpx.ReadTimeout) and idle is not None:
        read = exc.request.extensions.get("timeout", {}).get("read") if _has_request(exc) else None
        seconds = min(idle, read) if isinstance(read, int | float) else idle
        return idle_timeout_error(provider, seconds)
    parsed = httpx.URL(url)
    host = (parsed.netloc.decode("ascii", "replace") if parsed.host else "") or url
    detail = redact(str(exc).strip())
    suffix = f" ({_clip(detail)})" if detail else ""
    if isinstance(exc, httpx.ConnectTimeout):
        message, code = f"timed out connecting to {provider} at {host}", "connect_timeout"
    elif isinstance(exc, httpx.PoolTimeout):
        message, code = f"no free connection to {provider} at {host}", "pool_timeout"
    elif isinstance(exc, httpx.TimeoutException):
        message, code = f"{provider} at {host} stopped responding (timed out)", "timeout"
    elif isinstance(exc, httpx.ConnectError):
        message, code = f"cannot connect to {provider} at {host}{suffix}", "connect_error"
        if is_loopback_url(url):
            # Nothing listens on this machine: waiting will not start it. One more
            # try (it may be starting up), then say what to start.
            return ProviderError(
                f"{message}: {local_server_hint(provider)}",
                provider=provider,
                code=code,
                retryable=True,
                retry_limit=LOCAL_CONNECT_RETRIES,
                reason="cannot connect",
            )
    elif isinstance(exc, httpx.UnsupportedProtocol):
        return ProviderError(
            f"{provider}: unsupported URL {url!r}{suffix}",
            provider=provider,
            code="bad_url",
        )
    elif isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        message, code = f"connection to {provider} at {host} was lost{suffix}", "connection_lost"
    elif isinstance(exc, httpx.DecodingError):
        message, code = f"{provider} sent a response that could not be decoded", "invalid_stream"
    else:
        message, code = f"request to {provider} at {host} failed{suffix}", "transport_error"
    return ProviderError(message, provider=provider, code=code, retryable=True)


def _has_request(exc: httpx.RequestError) -> bool:
    try:
        exc.request  # noqa: B018 (raises RuntimeError when the error has none)
    except RuntimeError:
        return False
    return True
