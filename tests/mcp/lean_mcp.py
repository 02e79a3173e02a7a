"""The protocol half of the tests' lean MCP servers (tests/mcp/lean_server.py,
tests/mcp/catalog_server.py): a test double that speaks the real MCP wire format with
the standard library only.

Why: the official SDK's server costs ~0.7 s of CPU to import (its pydantic models)
and the suite starts dozens of test servers. This module answers every request
bastion's client makes exactly as the `mcp` SDK v2.3.0 server (`MCPServer`, the
`initialize` handshake) does on the wire: the same fields and shapes, schemas derived
from the tools' signatures as the SDK derives them, the same error codes and texts
(argument errors as pydantic 2.14 words them). tests/mcp/test_mcp_sdk_interop.py
compares its answers with the SDK server's, so a drift of either shows.

Transports: newline-delimited JSON-RPC on stdin/stdout (here) and streamable HTTP
(tests/mcp/lean_http.py).
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST = HANDSHAKE_VERSIONS[-1]  # the answer to a version the server does not know
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v/"  # (as the SDK's argument errors say)
REQUIRED = inspect.Parameter.empty
JSON_TYPES = {str: "string", int: "integer", float: "number"}  # (what the tools take)


class McpError(Exception):
    """A JSON-RPC error answer: `code`, the message, and `data` when the SDK sends one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class Cancelled(Exception):
    """A call the client cancelled (notifications/cancelled): it gets no answer."""


@dataclass
class Call:
    """What a tool that asks for it (a parameter annotated `Call`) knows of its call:
    `cancelled` is set by the client's notifications/cancelled, `notify` sends a
    notification on the call's own channel (as the SDK's `ctx.session` does)."""

    request_id: Any
    cancelled: threading.Event
    notify: Callable[[str], None]


@dataclass
class Image:
    """A tool's image result: `data` the bytes, `format` as in image/`format`."""

    data: bytes
    format: str


@dataclass
class Param:
    """One argument of a tool or a prompt: its name, Python type, default (REQUIRED
    when it has none) and description."""

    name: str
    kind: type = str
    default: Any = REQUIRED
    description: str | None = None

    def schema(self) -> dict[str, Any]:
        """Its property in the tool's inputSchema, as pydantic writes it."""
        out: dict[str, Any] = {}
        if self.default is not REQUIRED:
            out["default"] = self.default
        if self.description is not None:
            out["description"] = self.description
        out["title"] = self.name.title().replace("_", " ")
        out["type"] = JSON_TYPES[self.kind]
        return out


def params_of(fn: Callable[..., Any]) -> list[Param]:
    """A function's arguments as the SDK reads its signature (a `Call` is not one)."""
    hints = inspect.get_annotations(fn, eval_str=True)
    return [
        Param(p.name, hints.get(p.name, str), p.default)
        for p in inspect.signature(fn).parameters.values()
        if hints.get(p.name) is not Call
    ]


@dataclass
class Tool:
    """A tool: its function, listing, and the SDK's treatment of its arguments and result."""

    name: str
    fn: Callable[..., Any]
    description: str
    params: list[Param]
    wants_call: bool = False
    returns: type | None = None  # str gives an outputSchema and structuredContent

    def listing(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"properties": {p.name: p.schema() for p in self.params}}
        required = [p.name for p in self.params if p.default is REQUIRED]
        if required:
            schema["required"] = required
        schema |= {"type": "object", "title": f"{self.name}Arguments"}
        out: dict[str, Any] = {"description": self.description, "inputSchema": schema}
        out["name"] = self.name
        if self.returns is str:
            out["outputSchema"] = {
                "properties": {"result": {"title": "Result", "type": "string"}},
                "required": ["result"], "type": "object", "title": f"{self.name}Output",
            }  # fmt: skip
        return out

    def arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments, coerced as pydantic's lax mode does (extra ones are
        dropped); ValueError with pydantic's words when any is missing or wrong."""
        values, errors = {}, []
        for param in self.params:
            if param.name not in given:
                if param.default is REQUIRED:
                    errors.append((param.name, "Field required", "missing", given))
                else:
                    values[param.name] = param.default
                continue
            try:
                values[param.name] = coerce(param.kind, given[param.name])
            except _Invalid as bad:
                errors.append((param.name, bad.words, bad.kind, given[param.name]))
        if errors:
            raise ValueError(validation_text(f"{self.name}Arguments", errors))
        return values

    def result(self, value: Any) -> dict[str, Any]:
        """A tools/call result for what the function returned."""
        if isinstance(value, Image):
            data = base64.b64encode(value.data).decode()
            image = {"data": data, "mimeType": f"image/{value.format}", "type": "image"}
            return {"content": [image], "isError": False}
        text = value if isinstance(value, str) else json.dumps(value)
        out: dict[str, Any] = {"content": [{"text": text, "type": "text"}], "isError": False}
        if self.returns is str:
            out["structuredContent"] = {"result": value}
        return out


class _Invalid(Exception):
    def __init__(self, words: str, kind: str) -> None:
        self.words, self.kind = words, kind


def coerce(kind: type, value: Any) -> Any:
    """`value` as pydantic's lax mode takes it for a `kind` argument."""
    if kind is str:
        if isinstance(value, str):
            return value
        raise _Invalid("Input should be a valid string", "string_type")
    if kind is float:
        if isinstance(value, int | float):
            return float(value)
        try:
            return float(value.strip())
        except (AttributeError, ValueError):
            if isinstance(value, str):
                raise _Invalid(
                    "Input should be a valid number, unable to parse string as a number",
                    "float_parsing",
                ) from None
            raise _Invalid("Input should be a valid number", "float_type") from None
    return _coerce_int(value)


def _coerce_int(value: Any) -> int:
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _Invalid(
            "Input should be a valid integer, got a number with a fractional part",
            "int_from_float",
        )
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _Invalid(
                "Input should be a valid integer, unable to parse string as an integer",
                "int_parsing",
            ) from None
    raise _Invalid("Input should be a valid integer", "int_type")


def validation_text(title: str, errors: list[tuple[str, str, str, Any]]) -> str:
    """pydantic's ValidationError text: `errors` as (field, words, kind, input)."""
    count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} for {title}"
    lines = [count]
    for name, words, kind, value in errors:
        lines += [
            name,
            f"  {words} [type={kind}, input_value={value!r}, input_type={type(value).__name__}]",
            f"    For further information visit {PYDANTIC_DOCS}{kind}",
        ]
    return "\n".join(lines)


@dataclass
class Prompt:
    name: str
    fn: Callable[..., str]
    description: str
    params: list[Param]

    def listing(self) -> dict[str, Any]:
        arguments = [{"name": p.name, "required": p.default is REQUIRED} for p in self.params]
        return {"arguments": arguments, "description": self.description, "name": self.name}


@dataclass
class Resource:
    uri: str
    name: str
    fn: Callable[[], str | bytes]
    description: str
    mime_type: str

    def listing(self) -> dict[str, Any]:
        return {"description": self.description, "mimeType": self.mime_type,
                "name": self.name, "uri": self.uri}  # fmt: skip

    def contents(self) -> dict[str, Any]:
        value = self.fn()
        if isinstance(value, bytes):
            blob = base64.b64encode(value).decode()
            return {"blob": blob, "mimeType": self.mime_type, "uri": self.uri}
        return {"mimeType": self.mime_type, "text": value, "uri": self.uri}


@dataclass
class Server:
    """The tools, prompts and resources one server offers, shared by its sessions (a
    tool added while it runs is listed on every connection, as with the SDK)."""

    name: str
    tools: dict[str, Tool] = field(default_factory=dict)
    prompts: dict[str, Prompt] = field(default_factory=dict)
    resources: dict[str, Resource] = field(default_factory=dict)

    def add_tool(self, fn: Callable[..., Any], name: str | None = None,
                 description: str | None = None, params: list[Param] | None = None) -> None:  # fmt: skip
        hints = inspect.get_annotations(fn, eval_str=True)
        self.tools[name or fn.__name__] = Tool(
            name=name or fn.__name__,
            fn=fn,
            description=description if description is not None else inspect.getdoc(fn) or "",
            params=params if params is not None else params_of(fn),
            wants_call=Call in hints.values(),
            returns=hints.get("return"),
        )

    def tool(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.add_tool(fn)
            return fn

        return register

    def prompt(self) -> Callable[[Callable[..., str]], Callable[..., str]]:
        def register(fn: Callable[..., str]) -> Callable[..., str]:
            doc = inspect.getdoc(fn) or ""
            self.prompts[fn.__name__] = Prompt(fn.__name__, fn, doc, params_of(fn))
            return fn

        return register

    def resource(self, uri: str, *, name: str, mime_type: str, description: str = "") -> Any:
        def register(fn: Callable[[], str | bytes]) -> Callable[[], str | bytes]:
            self.resources[uri] = Resource(uri, name, fn, description, mime_type)
            return fn

        return register


def answer(message_id: Any, result: dict[str, Any] | None = None,
           error: McpError | None = None) -> dict[str, Any]:  # fmt: skip
    if error is not None:
        return {"jsonrpc": "2.0", "id": message_id, "error": error.body()}
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


def encode(message: dict[str, Any]) -> bytes:
    """One message's JSON as the SDK writes it: compact, UTF-8, not ASCII-escaped."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


class Session:
    """One client's connection (the stdio pipe, or an HTTP session): the handshake's
    state and the calls in flight, which notifications/cancelled may end."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.initialized = False
        self.protocol_version = LATEST
        self.calls: dict[Any, threading.Event] = {}
        self._lock = threading.Lock()

    def receive(self, message: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        """Handle one message; a request's answer (if it gets one) goes to `send`, as
        do the notifications it makes (on its own channel, as the SDK sends them)."""
        if "method" not in message:
            return  # a response to a request this server never makes
        if "id" not in message:
            self._notified(message["method"], message.get("params") or {})
            return
        reply = self.reply(message, send)
        if reply is not None:
            send(reply)

    def reply(self, message: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> Any:
        """The answer to one request, or None for a call the client cancelled."""
        message_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        handler = HANDLERS.get(method)
        try:
            if handler is None:
                raise McpError(METHOD_NOT_FOUND, "Method not found", method)
            if not self.initialized and method not in ("initialize", "ping"):
                raise McpError(INVALID_PARAMS, "Invalid request parameters", "")
            if method == "tools/call":
                return answer(message_id, self._call(message_id, params, send))
            return answer(message_id, handler(self, params))
        except Cancelled:
            return None
        except McpError as error:
            return answer(message_id, error=error)

    def unasked(self, message: dict[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        """A notification the server sends of its own accord during a call (the SDK
        relates it to no request): on stdio it goes down the one pipe."""
        send(message)

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/cancelled":
            with self._lock:
                cancelled = self.calls.get(params.get("requestId"))
            if cancelled is not None:
                cancelled.set()

    def _call(self, message_id: Any, params: dict[str, Any],
              send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:  # fmt: skip
        """tools/call: a tool's failure is a result with isError, as the SDK gives it."""
        name = params.get("name", "")
        tool = self.server.tools.get(name)
        if tool is None:
            return _error_result(f"Unknown tool: {name}")
        cancelled = threading.Event()
        with self._lock:
            self.calls[message_id] = cancelled
        try:
            kwargs = tool.arguments(params.get("arguments") or {})
            if tool.wants_call:
                notify = lambda method: self.unasked({"jsonrpc": "2.0", "method": method}, send)  # noqa: E731
                kwargs["call"] = Call(message_id, cancelled, notify)
            value = tool.fn(**kwargs)
        except Cancelled:
            raise
        except Exception as exc:
            if cancelled.is_set():
                raise Cancelled from None
            return _error_result(f"Error executing tool {name}: {exc}")
        finally:
            with self._lock:
                self.calls.pop(message_id, None)
        if cancelled.is_set():
            raise Cancelled
        return tool.result(value)


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "isError": True}


def _initialize(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    if not isinstance(requested, str) or not isinstance(params.get("clientInfo"), dict):
        raise McpError(INVALID_PARAMS, "Invalid request parameters", "")
    session.protocol_version = requested if requested in HANDSHAKE_VERSIONS else LATEST
    return {
        "capabilities": {
            "prompts": {"listChanged": False},
            "resources": {"listChanged": False, "subscribe": False},
            "tools": {"listChanged": False},
        },
        "protocolVersion": session.protocol_version,
        "serverInfo": {"name": session.server.name, "version": ""},
    }


def _get_prompt(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """prompts/get: the SDK answers a bad one with error code 0 and its words."""
    name, given = params.get("name", ""), params.get("arguments") or {}
    prompt = session.server.prompts.get(name)
    if prompt is None:
        raise McpError(0, f"Unknown prompt: {name}")
    missing = {p.name for p in prompt.params if p.default is REQUIRED and p.name not in given}
    if missing:
        raise McpError(0, f"Missing required arguments: {missing}")
    text = prompt.fn(**{p.name: given[p.name] for p in prompt.params if p.name in given})
    message = {"content": {"text": text, "type": "text"}, "role": "user"}
    return {"description": prompt.description, "messages": [message]}


def _read_resource(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    uri = params.get("uri", "")
    resource = session.server.resources.get(uri)
    if resource is None:
        raise McpError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
    return {"contents": [resource.contents()]}


HANDLERS: dict[str, Callable[[Session, dict[str, Any]], dict[str, Any]]] = {
    "initialize": _initialize,
    "ping": lambda session, params: {},
    "tools/list": lambda s, p: {"tools": [t.listing() for t in list(s.server.tools.values())]},
    "tools/call": lambda session, params: {},  # (Session._call: it needs the request's id)
    "prompts/list": lambda s, p: {"prompts": [x.listing() for x in s.server.prompts.values()]},
    "prompts/get": _get_prompt,
    "resources/list": lambda s, p: {
        "resources": [r.listing() for r in s.server.resources.values()]
    },
    "resources/templates/list": lambda session, params: {"resourceTemplates": []},
    "resources/read": _read_resource,
}


def serve_stdio(server: Server) -> None:
    """Newline-delimited JSON-RPC on stdin and stdout until stdin closes. A tool call
    runs on a thread of its own (a slow one must not hold the others, nor its own
    cancellation); every other request is answered at once, in order."""
    session, lock = Session(server), threading.Lock()
    out = sys.stdout.buffer

    def send(message: dict[str, Any]) -> None:
        line = encode(message) + b"\n"
        with lock:
            out.write(line)
            out.flush()

    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError as exc:
            print(f"Failed to parse JSONRPC message: {exc}", file=sys.stderr, flush=True)
            continue
        if not isinstance(message, dict):
            continue
        if message.get("method") == "tools/call" and "id" in message:
            work = threading.Thread(target=session.receive, args=(message, send), daemon=True)
            work.start()
        else:
            session.receive(message, send)


def main(server: Server, argv: list[str]) -> None:
    """`stdio [--hang] [--die-after SECONDS]` or `http --port-file FILE`, as the SDK
    test server's command line is."""
    mode = argv[1] if len(argv) > 1 and not argv[1].startswith("--") else "stdio"
    if "--hang" in argv:
        import time

        time.sleep(3600)  # (the thing under test: a server that never starts)
    if "--die-after" in argv:  # a server that starts, then exits: again and again
        seconds = float(argv[argv.index("--die-after") + 1])
        threading.Timer(seconds, lambda: os._exit(4)).start()
    if mode == "http":
        from lean_http import serve_http  # (beside this file: the script's own folder)

        serve_http(server, argv[argv.index("--port-file") + 1])
    else:
        serve_stdio(server)
