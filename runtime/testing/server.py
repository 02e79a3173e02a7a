"""A loopback OpenAI-compatible server that replays scripted turns.

It speaks the real wire format over real HTTP/1.1 (keep-alive, chunked
transfer encoding, `text/event-stream`), so everything between the model loop
and the socket is exercised, and it records what it was sent.

In tests, in-process (the server runs on its own thread and event loop, so it
serves sync tests, async tests and other processes alike):

    async with LoopbackServer([{"text": "hello"}]) as server:   # or `with`
        provider = OpenAIChatProvider("openai", server.base_url)
        ...
        assert server.requests[0].body["stream_options"] == {"include_usage": True}

As a process, for end-to-end tests of the real `bastion` command:

    python -m runtime.testing.server --script turns.json --port-file PORT \\
        [--record requests.jsonl] [--port N] [--host 127.0.0.1]

writes its port to PORT once listening, appends each chat request body as one
JSON line to the record file (flushed at once), and runs until SIGTERM/SIGINT.
Given a command after `--`, it runs that command once listening, with
OPENAI_BASE_URL and ANTHROPIC_BASE_URL pointing at itself, and exits with the
command's exit code when it ends (no port to read, nothing left running):

    python -m runtime.testing.server --script turns.json -- bastion -p hi --model openai/demo

Routes: `POST .../chat/completions` (OpenAI chat completions), `POST
.../messages` (Anthropic Messages, same turns in that wire format: point
ANTHROPIC_BASE_URL at `server.url`), `POST .../responses` (the OpenAI Responses
API, same turns again; `server.base_url` as for chat), `GET .../models`, and
`GET /api/tags` (Ollama's model list, so the server can stand in for a local Ollama).

Turn selection: a turn with `match` is taken when its substring occurs in the
last user message (the first such unconsumed turn wins); otherwise the first
unconsumed turn without `match` is taken. A step (`unless`) with `match` is
served only to requests whose last user message has it (one script can then
drive a conversation and its subagents, each with its own steps). Every turn, fault turns included, is
consumed once. With no turn left the answer is HTTP 400 "loopback script
exhausted".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from runtime.testing.anthropic_wire import (
    anthropic_error,
    error_event,
    message_body,
    render_messages_stream,
)
from runtime.testing.responses_wire import error_event as responses_error_event
from runtime.testing.responses_wire import render_responses_stream, response_body
from runtime.testing.turns import (
    Fault,
    LoopbackTurn,
    RenderedStream,
    as_turn,
    completion_body,
    error_body,
    last_user_text,
    render_stream,
)

__all__ = ["LoopbackServer", "RecordedRequest", "serve"]

_BLOCK = 64 * 1024  # bytes per socket write when streaming without delays
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it; header names are lower-case. `received` is
    the wall-clock time (time.time()) at which its whole body had arrived."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received: float = 0.0

    @property
    def json(self) -> Any:
        return self.body


@dataclass(slots=True)
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    keep_alive: bool


class _Script:
    """The turns and what was asked of them; shared between threads, so locked."""

    def __init__(self, turns: Iterable[LoopbackTurn | Mapping[str, Any]]) -> None:
        self._lock = threading.Lock()
        self._turns: list[LoopbackTurn] = [as_turn(t) for t in turns]
        self._used: list[bool] = [False] * len(self._turns)
        self.requests: list[RecordedRequest] = []
        self.served = 0
        self.connections = 0  # TCP connections accepted

    def add(self, turns: Iterable[LoopbackTurn | Mapping[str, Any]]) -> None:
        parsed = [as_turn(t) for t in turns]
        with self._lock:
            self._turns.extend(parsed)
            self._used.extend([False] * len(parsed))

    @property
    def remaining(self) -> int:
        with self._lock:
            return self._used.count(False)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def take(self, body: Any) -> tuple[LoopbackTurn | None, int]:
        text = last_user_text(body) if isinstance(body, Mapping) else ""
        results = _tool_results(body) if isinstance(body, Mapping) else []
        with self._lock:
            self.served += 1
            step = next(
                (
                    t
                    for t in self._turns
                    if t.unless
                    and (t.match is None or t.match in text)
                    and not any(m in r for m in t.unless for r in results)
                ),
                None,
            )
            if step is not None:
                return step, self.served
            chosen = next(
                (
                    i
                    for i, t in enumerate(self._turns)
                    if not self._used[i]
                    and t.match is not None
                    and t.match in text
                    and not t.unless
                ),
                None,
            )
            if chosen is None:
                chosen = next(
                    (
                        i
                        for i, t in enumerate(self._turns)
                        if not self._used[i] and t.match is None and not t.unless
                    ),
                    None,
                )
            if chosen is None:
                return None, self.served
            self._used[chosen] = not self._turns[chosen].repeat
            return self._turns[chosen], self.served


def _tool_results(body: Mapping[str, Any]) -> list[str]:
    """The text of every tool result in a request (OpenAI tool messages, Anthropic
    tool_result blocks)."""
    out: list[str] = []
    for item in body.get("input") or ():  # Responses API function_call_output items
        if isinstance(item, Mapping) and item.get("type") == "function_call_output":
            output = item.get("output")
            out.append(output if isinstance(output, str) else json.dumps(output))
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if message.get("role") == "tool":
            out.append(content if isinstance(content, str) else json.dumps(content))
        elif isinstance(content, list):
            out.extend(
                json.dumps(block.get("content"))
                for block in content
                if isinstance(block, Mapping) and block.get("type") == "tool_result"
            )
    return out


class _Protocol:
    """HTTP/1.1 for one connection at a time: parse requests, write responses."""

    def __init__(
        self, script: _Script, record_file: IO[str] | None, headers_file: IO[str] | None = None
    ) -> None:
        self.script = script
        self.record_file = record_file
        self.headers_file = headers_file
        self.tasks: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        self.script.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                if not await self._respond(request, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except (ValueError, UnicodeError) as exc:  # a request this parser cannot read
            self._complain(f"bad request: {exc}")
            writer.transport.abort()
        except Exception as exc:  # a bug here must not take the whole server down
            self._complain(f"internal error: {type(exc).__name__}: {exc}")
            writer.transport.abort()
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        finally:
            if task is not None:
                self.tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    def _complain(self, message: str) -> None:
        # One short line per problem: a parent reading stderr through a pipe
        # (and perhaps never draining it) must not be flooded.
        print(f"loopback server: {message}"[:300], file=sys.stderr, flush=True)

    async def _respond(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        path = request.path.split("?", 1)[0].rstrip("/")
        if request.method == "GET" and path.endswith("/models"):
            models = {
                "object": "list",
                "data": [
                    {"id": "loopback", "object": "model", "created": 0, "owned_by": "bastion"}
                ],
            }
            await _send_json(writer, 200, models, keep_alive=request.keep_alive)
            return request.keep_alive
        if request.method == "GET" and path.endswith("/api/tags"):  # Ollama's model list
            tags = {"models": [{"name": "loopback:latest", "model": "loopback:latest"}]}
            await _send_json(writer, 200, tags, keep_alive=request.keep_alive)
            return request.keep_alive
        if request.method == "POST" and path.endswith("/chat/completions"):
            return await self._chat(request, reader, writer, _OPENAI)
        if request.method == "POST" and path.endswith("/messages"):
            return await self._chat(request, reader, writer, _ANTHROPIC)
        if request.method == "POST" and path.endswith("/responses"):
            return await self._chat(request, reader, writer, _RESPONSES)
        body = error_body(f"no route for {request.method} {path}", code="not_found")
        await _send_json(writer, 404, body, keep_alive=request.keep_alive)
        return request.keep_alive

    async def _chat(
        self,
        request: _Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dialect: _Dialect,
    ) -> bool:
        keep_alive = request.keep_alive
        received = time.time()
        try:
            body = json.loads(request.raw_body) if request.raw_body else None
        except ValueError:
            body = None
        self.script.record(
            RecordedRequest(request.method, request.path, request.headers, body, received)
        )
        if self.record_file is not None:
            self.record_file.write(json.dumps(body, ensure_ascii=False) + "\n")
            self.record_file.flush()
        if self.headers_file is not None:
            line = {"path": request.path, "headers": request.headers}
            self.headers_file.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.headers_file.flush()
        if not isinstance(body, dict):
            error = dialect.error("request body is not a JSON object", "invalid_request_error")
            await _send_json(writer, 400, error, keep_alive=keep_alive)
            return keep_alive
        turn, serial = self.script.take(body)
        if turn is None:
            error = dialect.error(
                "loopback script exhausted: no scripted turn left for this request",
                "script_exhausted",
            )
            await _send_json(writer, 400, error, keep_alive=keep_alive)
            return keep_alive
        fault = turn.fault
        if fault is not None and fault.delay_first_byte_ms:
            await asyncio.sleep(fault.delay_first_byte_ms / 1000)
        if fault is not None and fault.status is not None:
            return await _send_fault_status(writer, fault.status, fault, keep_alive, dialect)
        if not body.get("stream"):
            whole = dialect.whole(turn, body, serial=serial)
            await _send_json(writer, 200, whole, keep_alive)
            return keep_alive
        return await _stream(turn, body, serial, reader, writer, keep_alive, dialect)


@dataclass(frozen=True, slots=True)
class _Dialect:
    """What differs between the OpenAI route and the Anthropic route."""

    render: Callable[..., RenderedStream]
    whole: Callable[..., dict[str, Any]]
    error: Callable[[str, str], dict[str, Any]]  # (message, type) -> error body
    error_event: Callable[[Any], bytes]
    stream_error_type: str
    keepalive: bytes = b": ping\n\n"


def _openai_error(message: str, kind: str) -> dict[str, Any]:
    return error_body(message, kind=kind, code=kind)


def _openai_error_event(body: Any) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _anthropic_error(message: str, kind: str) -> dict[str, Any]:
    return anthropic_error(message, kind=kind)


_OPENAI = _Dialect(
    render_stream, completion_body, _openai_error, _openai_error_event, "server_error"
)
_ANTHROPIC = _Dialect(
    render_messages_stream,
    message_body,
    _anthropic_error,
    error_event,
    "overloaded_error",
    b'event: ping\ndata: {"type": "ping"}\n\n',
)
_RESPONSES = _Dialect(
    render_responses_stream, response_body, _openai_error, responses_error_event, "server_error"
)


async def _stream(
    turn: LoopbackTurn,
    body: dict[str, Any],
    serial: int,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    keep_alive: bool,
    dialect: _Dialect,
) -> bool:
    rendered = dialect.render(turn, body, serial=serial)
    fault = turn.fault
    cut = fault.cut_after() if fault is not None else None
    chunks = rendered.chunks if cut is None else rendered.chunks[:cut]
    writer.write(
        _head(
            200,
            {
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "Transfer-Encoding": "chunked",
            },
            keep_alive,
        )
    )
    if turn.delay_ms > 0 or turn.pauses or turn.holds:
        _write_chunked(writer, rendered.head)
        for index, chunk in enumerate(chunks):
            await writer.drain()
            await asyncio.sleep((turn.delay_ms + turn.pauses.get(str(index), 0.0)) / 1000)
            await _held(turn, index, writer)
            _write_chunked(writer, chunk)
        await writer.drain()
        await _held(turn, len(chunks), writer)
    else:
        await _write_blocks(writer, [rendered.head, *chunks])
    await writer.drain()
    if fault is None or cut is None:
        _write_chunked(writer, rendered.tail)
    elif cut == fault.disconnect_after_chunks:
        writer.transport.abort()
        return False
    elif cut == fault.ping_after_chunks:
        # Alive but going nowhere: keep-alives only, until the client goes away.
        while not writer.transport.is_closing():
            _write_chunked(writer, dialect.keepalive)
            await writer.drain()
            await asyncio.sleep(fault.ping_interval_ms / 1000)
        return False
    elif cut == fault.hang_after_chunks:
        # Keep the connection open, sending nothing, until the client goes away.
        while await reader.read(_BLOCK):
            pass
        return False
    else:
        message = "loopback injected a mid-stream error"
        error = fault.body or dialect.error(message, dialect.stream_error_type)
        _write_chunked(writer, dialect.error_event(error))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return keep_alive


async def _held(turn: LoopbackTurn, index: int, writer: asyncio.StreamWriter) -> None:
    """Until the test sets the turn's hold before chunk `index` (if it has one), or the
    client goes away."""
    hold = turn.holds.get(index)
    while hold is not None and not hold.is_set() and not writer.transport.is_closing():
        await asyncio.sleep(0.01)  # (polls the test's threading.Event from this loop)


async def _write_blocks(writer: asyncio.StreamWriter, events: list[bytes]) -> None:
    """Write many events as few HTTP chunks of about 64 KB each."""
    block: list[bytes] = []
    size = 0
    for event in events:
        block.append(event)
        size += len(event)
        if size >= _BLOCK:
            _write_chunked(writer, b"".join(block))
            await writer.drain()
            block, size = [], 0
    if block:
        _write_chunked(writer, b"".join(block))


def _write_chunked(writer: asyncio.StreamWriter, data: bytes) -> None:
    if data:
        writer.write(b"%x\r\n%b\r\n" % (len(data), data))


def _head(status: int, headers: Mapping[str, str], keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    keep_alive: bool,
    headers: Mapping[str, str] | None = None,
) -> None:
    payload = json.dumps(body, ensure_ascii=False).encode()
    all_headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
    all_headers.update(headers or {})
    writer.write(_head(status, all_headers, keep_alive) + payload)
    await writer.drain()


async def _send_fault_status(
    writer: asyncio.StreamWriter, status: int, fault: Fault, keep_alive: bool, dialect: _Dialect
) -> bool:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    body = fault.body
    if body is None:
        kind = (
            "rate_limit_error"
            if status == 429
            else ("server_error" if status >= 500 else "invalid_request_error")
        )
        body = dialect.error(f"loopback injected HTTP {status}", kind)
    await _send_json(writer, status, body, keep_alive, headers)
    return keep_alive


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = [*lines[0].split(" ", 2), "", ""][:3]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length") or 0))
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
    return _Request(method, target, headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


# --- running it ---------------------------------------------------------------


async def serve(
    script: _Script,
    *,
    host: str,
    port: int,
    stop: asyncio.Event,
    on_listening: Callable[[int], None] | None = None,
    record_file: IO[str] | None = None,
    headers_file: IO[str] | None = None,
) -> None:
    """Serve until `stop` is set; `on_listening(port)` is called once bound."""
    protocol = _Protocol(script, record_file, headers_file)
    server = await asyncio.start_server(protocol.handle, host, port, limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    try:
        if on_listening is not None:
            on_listening(bound)
        await stop.wait()
    finally:
        server.close()
        for task in list(protocol.tasks):
            task.cancel()
        if protocol.tasks:
            await asyncio.gather(*protocol.tasks, return_exceptions=True)
        await server.wait_closed()


class LoopbackServer:
    """The loopback server on a background thread; use `with` or `async with`.

    `record`, when given, is a file each chat request body is appended to as a
    JSON line, as with `--record`; `record_headers` each request's path and headers,
    as with `--record-headers`.
    """

    def __init__(
        self,
        turns: Iterable[LoopbackTurn | Mapping[str, Any]] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record: str | os.PathLike[str] | None = None,
        record_headers: str | os.PathLike[str] | None = None,
    ) -> None:
        self._script = _Script(turns)
        self._host = host
        self._port = port
        self._record = record
        self._record_headers = record_headers
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        if not self._ready.is_set() or self._failure is not None:
            raise RuntimeError("the loopback server is not running")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. http://127.0.0.1:PORT/v1."""
        return self.url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Chat completion requests received so far, in arrival order."""
        return list(self._script.requests)

    @property
    def remaining(self) -> int:
        """How many scripted turns are still unconsumed."""
        return self._script.remaining

    @property
    def connections(self) -> int:
        """How many TCP connections the server accepted (keep-alive reuse shows here)."""
        return self._script.connections

    def add_turns(self, *turns: LoopbackTurn | Mapping[str, Any]) -> None:
        self._script.add(turns)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the loopback server was already started")
        self._thread = threading.Thread(target=self._run, name="loopback-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise RuntimeError(f"loopback server failed to start: {self._failure}")

    def stop(self) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop may have just finished
                loop.call_soon_threadsafe(stop.set)
        if thread is not None:
            thread.join(timeout=10)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def listening(port: int) -> None:
                self._port = port
                self._ready.set()

            files = [
                open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
                for path in (self._record, self._record_headers)
            ]
            try:
                await serve(
                    self._script,
                    host=self._host,
                    port=self._port,
                    stop=self._stop,
                    on_listening=listening,
                    record_file=files[0],
                    headers_file=files[1],
                )
            finally:
                for handle in files:
                    if handle is not None:
                        handle.close()

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to the starting thread
            self._failure = exc
        finally:
            self._ready.set()

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LoopbackServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


def load_script(path: str | os.PathLike[str]) -> list[LoopbackTurn]:
    """Turns from a JSON file: a list of turn objects, or {"turns": [...]}."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        data = data.get("turns")
    if not isinstance(data, list):
        raise ValueError("a script is a JSON list of turns (or an object with a 'turns' list)")
    return [LoopbackTurn.from_dict(t) for t in data]


def _write_port_file(path: str, port: int) -> None:
    """Write atomically, so a reader never sees an empty or partial file."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(f"{port}\n")
    os.replace(temporary, path)


async def _main_async(args: argparse.Namespace, command: list[str]) -> int:
    """Serve until SIGTERM/SIGINT (0), or, given `command`, until it ends (its code)."""
    script = _Script(load_script(args.script) if args.script else [])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if not command:  # with a command, Ctrl+C is the command's to handle; it ends us
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
    record = open(args.record, "a", encoding="utf-8") if args.record else None  # noqa: SIM115
    headers = open(args.record_headers, "a", encoding="utf-8") if args.record_headers else None  # noqa: SIM115
    bound: asyncio.Future[int] = loop.create_future()

    def listening(port: int) -> None:
        if args.port_file:
            _write_port_file(args.port_file, port)
        if not command:
            print(f"loopback server listening on http://{args.host}:{port}/v1", file=sys.stderr)
        bound.set_result(port)

    server = asyncio.ensure_future(
        serve(
            script,
            host=args.host,
            port=args.port,
            stop=stop,
            on_listening=listening,
            record_file=record,
            headers_file=headers,
        )
    )
    try:
        if not command:
            await server  # until a signal; its error (a port in use) is raised here
            return 0
        either: list[asyncio.Future[Any]] = [server, bound]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if server.done():
            await server  # it could not listen: its error
        code = await _run_command(command, args.host, bound.result())
        stop.set()
        await server
        return code
    finally:
        stop.set()
        for handle in (record, headers):
            if handle is not None:
                handle.close()


async def _run_command(command: list[str], host: str, port: int) -> int:
    """Run `command` pointed at this server; its exit code (128+N for signal N)."""
    env = dict(os.environ)
    env["OPENAI_BASE_URL"] = f"http://{host}:{port}/v1"
    env["ANTHROPIC_BASE_URL"] = f"http://{host}:{port}"
    process = await asyncio.create_subprocess_exec(*command, env=env)
    loop = asyncio.get_running_loop()
    # Ctrl+C reaches the command too (one process group): what it does is its own call.
    loop.add_signal_handler(signal.SIGINT, lambda: None)
    loop.add_signal_handler(signal.SIGTERM, process.terminate)
    code = await process.wait()
    return 128 - code if code < 0 else code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime.testing.server",
        description="A loopback OpenAI-compatible server replaying scripted turns.",
    )
    parser.add_argument("--script", help="JSON file with the list of turns")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--record", help="append each request body as a JSON line here")
    parser.add_argument(
        "--record-headers", help="append each request's path and headers as a JSON line here"
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: any free)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.epilog = (
        "After --, a command to run once listening, with OPENAI_BASE_URL and "
        "ANTHROPIC_BASE_URL set to this server; the exit code is the command's."
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if "--" in argv and not command:
        parser.error("give a command after --")
    try:
        return asyncio.run(_main_async(args, command))
    except (OSError, ValueError) as exc:
        print(f"loopback server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
