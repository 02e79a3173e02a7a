"""Streamable HTTP for the tests' lean MCP servers (tests/mcp/lean_mcp.py): the
transport as the `mcp` SDK v2.3.0 server serves it at /mcp, with the standard
library's http.server (a test double: loopback, one thread a request).

What the SDK server does, and this does too: POST /mcp carries one JSON-RPC message;
`initialize` opens a session whose id comes back in `Mcp-Session-Id`, which every
later request must carry (400 without it, 404 for one unknown or ended); a request is
answered with a text/event-stream of `message` events (the notifications it makes,
then its answer), a notification with 202 and no body; a client that does not accept
both application/json and text/event-stream gets 406. GET /mcp opens the session's
server-to-client stream (one at a time: 409), which stays open until the session
ends and carries what the server says unasked (tools/list_changed: with no such stream
open it is not sent at all); DELETE /mcp ends the session. An error's JSON-RPC code and
shape are the SDK's; a parse error's words are Python's json's, not pydantic's.
"""

from __future__ import annotations

import json
import os
import queue
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lean_mcp import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    McpError,
    Server,
    Session,
    answer,
    encode,
)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


ENVELOPE = (
    "params._meta must be an object carrying the required "
    "'io.modelcontextprotocol/protocolVersion' and "
    "'io.modelcontextprotocol/clientCapabilities' envelope keys"
)  # (the SDK's answer to a version it knows no handshake for: it takes it for a newer one)


class HttpSession(Session):
    """A Session with its server-to-client stream (GET /mcp): what the server says
    unasked is queued for it while one is open; None ends it."""

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.streaming = False
        self.outbox: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def unasked(self, message: dict[str, Any], send: Any) -> None:
        if self.streaming:  # (never on the call's own stream, as with the SDK)
            self.outbox.put(message)


class Handler(BaseHTTPRequestHandler):
    """/mcp's three methods; `server.mcp` is the Server, `server.sessions` its sessions."""

    protocol_version = "HTTP/1.1"  # keep-alive, and chunked event streams

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet, as the SDK server runs (uvicorn at log level "warning")."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))  # (all of it:
        if not self._at_mcp():  # the connection is kept for the next request)
            return
        accept = self.headers.get("accept", "")
        if not ("application/json" in accept and "text/event-stream" in accept):
            words = "Not Acceptable: Client must accept both application/json and text/event-stream"
            return self._error(406, INVALID_REQUEST, words)
        if not self.headers.get("content-type", "").startswith("application/json"):
            return self._body(400, None, b"Invalid Content-Type header")
        try:
            message = json.loads(body)
        except ValueError as exc:
            return self._error(400, PARSE_ERROR, f"Parse error: {exc}")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return self._error(400, INVALID_REQUEST, "Validation error: not a JSON-RPC message")
        if message.get("method") == "initialize":
            session_id = os.urandom(16).hex()
            self.server.sessions[session_id] = HttpSession(self.server.mcp)  # type: ignore[attr-defined]
        else:
            session_id = self._session_id()
            if session_id is None or not self._version_ok(message):
                return
        self._post(self.server.sessions[session_id], session_id, message)  # type: ignore[attr-defined]

    def _post(self, session: HttpSession, session_id: str, message: dict[str, Any]) -> None:
        """A request's answer as an event stream; anything else: 202."""
        if "id" not in message or "method" not in message:
            session.receive(message, lambda _: None)
            self._empty(202, session_id)
            return
        self._open_stream(session_id)

        def send(event: dict[str, Any]) -> None:
            self._chunk(b"event: message\r\ndata: " + encode(event) + b"\r\n\r\n")

        try:
            session.receive(message, send)
            self._chunk(b"")
        except OSError:
            pass  # the client went away (it cancelled the call): nothing to tell it

    def do_GET(self) -> None:
        """The server-to-client stream: open until the session ends."""
        if not self._at_mcp():
            return
        if "text/event-stream" not in self.headers.get("accept", ""):
            words = "Not Acceptable: Client must accept text/event-stream"
            return self._error(406, INVALID_REQUEST, words)
        session_id = self._session_id()
        if session_id is None:
            return
        session = self.server.sessions[session_id]  # type: ignore[attr-defined]
        if session.streaming:
            words = "Conflict: Only one SSE stream is allowed per session"
            return self._error(409, INVALID_REQUEST, words)
        session.streaming = True
        self._open_stream(session_id)
        try:
            while (message := session.outbox.get()) is not None:
                self._chunk(b"event: message\r\ndata: " + encode(message) + b"\r\n\r\n")
            self._chunk(b"")
        except OSError:
            pass
        finally:
            session.streaming = False

    def do_DELETE(self) -> None:
        if not self._at_mcp():
            return
        session_id = self._session_id()
        if session_id is None:
            return
        self.server.sessions.pop(session_id).outbox.put(None)  # type: ignore[attr-defined]
        self._empty(200, session_id)

    def _at_mcp(self) -> bool:
        if self.path.split("?", 1)[0] == "/mcp":
            return True
        self._plain(404, "Not Found")
        return False

    def _session_id(self) -> str | None:
        """The request's session, answered 400 or 404 (and None) when it has none."""
        session_id = self.headers.get(SESSION_HEADER)
        if session_id is None:  # (the SDK's answer names a session it never opens)
            fresh = {SESSION_HEADER: os.urandom(16).hex()}
            self._error(400, INVALID_REQUEST, "Bad Request: Missing session ID", fresh)
            return None
        if session_id not in self.server.sessions:  # type: ignore[attr-defined]
            self._error(404, INVALID_REQUEST, "Session not found")
            return None
        return session_id

    def _version_ok(self, message: dict[str, Any]) -> bool:
        version = self.headers.get(VERSION_HEADER)
        if version is None or version in HANDSHAKE_VERSIONS:
            return True
        refused = answer(message.get("id"), error=McpError(INVALID_PARAMS, ENVELOPE))
        self._body(400, "application/json", encode(refused))
        return False

    def _open_stream(self, session_id: str) -> None:
        self.send_response(200)
        for name, value in (
            ("cache-control", "no-cache, no-transform"), ("connection", "keep-alive"),
            ("content-type", "text/event-stream"), (SESSION_HEADER, session_id),
            ("x-accel-buffering", "no"), ("transfer-encoding", "chunked"),
        ):  # fmt: skip
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        """One chunk of a chunked body (an empty one ends it)."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _error(self, status: int, code: int, message: str, headers: dict | None = None) -> None:
        """A transport's error; inside a session it names the session, as the SDK's do."""
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        session_id = self.headers.get(SESSION_HEADER)
        if headers is None and session_id in self.server.sessions:  # type: ignore[attr-defined]
            headers = {SESSION_HEADER: session_id}
        self._body(status, "application/json", encode(error), headers)

    def _plain(self, status: int, text: str) -> None:
        self._body(status, "text/plain; charset=utf-8", text.encode())

    def _empty(self, status: int, session_id: str) -> None:
        self._body(status, "application/json", b"", {SESSION_HEADER: session_id})

    def _body(
        self, status: int, kind: str | None, body: bytes, headers: dict | None = None
    ) -> None:
        self.send_response(status)
        if kind is not None:
            self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def serve_http(server: Server, port_file: str) -> None:
    """Serve on a loopback port of its own, written to `port_file` once it listens."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = sock
    httpd.daemon_threads = True
    httpd.mcp, httpd.sessions = server, {}  # type: ignore[attr-defined]
    Path(port_file).write_text(str(sock.getsockname()[1]))
    httpd.serve_forever()
