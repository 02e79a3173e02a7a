"""Bastion with a server written with the official `mcp` SDK (tests/mcp/mcp_server.py),
over stdio and streamable HTTP: the rest of the MCP tests use the lean double
(tests/mcp/lean_server.py), so these prove the client works with the real thing, and
that the double answers every request as the SDK's server does (the same messages,
bytes apart: field order), so a new SDK that answers differently shows here."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from runtime import Harness
from runtime.model.errors import McpUnavailable
from runtime.model.results import ServerState
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.mcp.conftest import SDK_SERVER, SERVER, sdk_stdio_server
from tests.mcp.test_mcp_harness import told, turn


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_bastion_lists_calls_and_reads_a_server_written_with_the_sdk(
    tmp_path, request, transport
):
    table = (
        sdk_stdio_server()
        if transport == "stdio"
        else {"url": request.getfixturevalue("sdk_http_server")}
    )
    provider = ScriptedProvider([turn("t__echo", text="hi"), ScriptedTurn(text="done")])
    harness = await Harness.open(
        tmp_path / "home" / "bastion.sqlite",
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        config=Config(mcp_servers={"t": table}),
    )
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(conv.id, interactive=True, approval_mode="ask", allow=("t__*",))
        (status,) = await harness.mcp_servers(wait=True)
        assert status.state is ServerState.READY and status.transport == transport
        assert len(status.tools) == 7 and {"t__echo", "t__slow", "t__grow"} <= set(status.tools)
        run = await harness.wait((await harness.submit(conv.id, "go")).id, conv.id)
        assert run.state == "completed" and told(provider) == "echo: hi"
        schema = next(t for t in provider.requests[0].tools if t.name == "t__echo").parameters
        assert schema["properties"]["text"]["type"] == "string" and schema["required"] == ["text"]
        assert await harness.mcp_prompt("t", "review", {"file": "x.py"}) == "Please review x.py."
        assert await harness.mcp_resource("t", "notes://team/guide") == (
            "GUIDE: tabs, never spaces.\n", "")  # fmt: skip
        with pytest.raises(McpUnavailable, match="not text"):
            await harness.mcp_resource("t", "notes://team/logo")
    finally:
        await harness.close()


def request(i: Any, method: str, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": method}
    return message | ({"params": params} if params else {})


def call(i: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    return request(i, "tools/call", name=tool, arguments=arguments)


def notification(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method} | ({"params": params} if params else {})


INITIALIZE = request(1, "initialize", protocolVersion="2025-06-18", capabilities={},
                     clientInfo={"name": "bastion", "version": "0"})  # fmt: skip

# Every request bastion's client makes, and the ways each can go wrong; "wait" steps
# are a file the server writes (the slow call has started; it saw its cancellation).
STDIO_STEPS: list[dict[str, Any]] = [
    request(0, "tools/list"),  # before the handshake
    INITIALIZE, notification("notifications/initialized"), request(2, "tools/list"),
    call(3, "echo", text="hi"), call(4, "echo"), call(5, "echo", text=5),
    call(6, "big", size="100"), call(7, "big", size="x"), call(8, "big", size=1.5),
    call(9, "nope"), call(10, "env", name="WIRE_TEST"), call(11, "image"),
    call(12, "slow", seconds=0.01), call(13, "slow", seconds="soon"),
    request(14, "prompts/list"), request(15, "prompts/get", name="review", arguments={"file": "a"}),
    request(16, "prompts/get", name="review", arguments={"file": "a", "focus": "bugs"}),
    request(17, "prompts/get", name="review", arguments={}), request(18, "prompts/get", name="no"),
    request(19, "resources/list"), request(20, "resources/templates/list"),
    request(21, "resources/read", uri="notes://team/guide"),
    request(22, "resources/read", uri="notes://team/logo"),
    request(23, "resources/read", uri="notes://team/nope"),
    request(24, "ping"), request(25, "logging/setLevel", level="info"),
    call("s", "slow", seconds=60, marker="TMP/started") | {"unanswered": True},
    {"wait": "started"}, notification("notifications/cancelled", requestId="s", reason="Esc"),
    {"wait": "started.cancelled"}, request(26, "ping"),
    call(27, "grow"), request(28, "tools/list"), call(29, "late"),
    request(30, "resources/read", uri="notes://team/huge"),
]  # fmt: skip


def stdio_transcript(script: Path, tmp: Path) -> list[Any]:
    """What the server at `script` sends for STDIO_STEPS, in order ("TMP" for `tmp`)."""
    env = {**os.environ, "WIRE_TEST": "set"}
    proc = subprocess.Popen([sys.executable, str(script), "stdio"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    guard = threading.Timer(60, proc.kill)  # (a server that stops answering fails the test)
    guard.start()
    said: list[Any] = []
    try:
        for step in STDIO_STEPS:
            if "wait" in step:
                deadline = time.monotonic() + 30
                while not (tmp / step["wait"]).exists():
                    assert time.monotonic() < deadline, f"{script.name}: no {step['wait']}"
                    time.sleep(0.01)  # (poll interval)
                continue
            sent = {k: v for k, v in step.items() if k != "unanswered"}
            proc.stdin.write(json.dumps(sent).replace("TMP", str(tmp)).encode() + b"\n")
            proc.stdin.flush()
            while "id" in step and not step.get("unanswered"):
                said.append(json.loads(proc.stdout.readline()))
                if said[-1].get("id") == step["id"]:
                    break
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        guard.cancel()
        proc.kill()
    return json.loads(json.dumps(said).replace(str(tmp), "TMP"))


def test_the_lean_server_says_over_stdio_what_the_sdk_server_says(tmp_path):
    (tmp_path / "sdk").mkdir()
    (tmp_path / "lean").mkdir()
    sdk = stdio_transcript(SDK_SERVER, tmp_path / "sdk")
    assert len(sdk) == 32 and sdk[-6] == {"jsonrpc": "2.0", "id": 26, "result": {}}
    assert stdio_transcript(SERVER, tmp_path / "lean") == sdk


JSON_AND_EVENTS = "application/json, text/event-stream"


class HttpClient:
    """Raw streamable HTTP on one connection: each exchange as (status, content type,
    whether it named a session, the body: an event stream's messages, or its text)."""

    def __init__(self, url: str) -> None:
        where = urlsplit(url)
        self.connection = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
        self.session: str | None = None
        self.said: list[tuple[Any, ...]] = []

    def send(self, method: str, body: Any = None, *, path: str = "/mcp",
             accept: str = JSON_AND_EVENTS, version: str = "2025-11-25",
             session: bool = True) -> None:  # fmt: skip
        headers = {"accept": accept, "content-type": "application/json"}
        if session and self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": version}
        data = json.dumps(body) if body is not None else None
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        text, kind = response.read().decode(), response.getheader("content-type")
        named = response.getheader("mcp-session-id")
        if body is not None and body.get("method") == "initialize":
            self.session = named
        said: Any = text
        if kind == "text/event-stream":
            said = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        self.said.append((method, response.status, kind, named is not None, said))


def http_transcript(url: str) -> list[tuple[Any, ...]]:
    """What the server at `url` answers to each request bastion's client makes, and
    to ones without a session, with one it no longer has, or that it refuses."""
    client = HttpClient(url)
    client.send("POST", request(0, "ping"))  # no session yet
    client.send("POST", request(1, "initialize", protocolVersion="2025-11-25",
                                capabilities={}, clientInfo={"name": "b", "version": "0"}))  # fmt: skip
    client.send("POST", notification("notifications/initialized"))
    client.send("POST", request(2, "tools/list"))
    client.send("POST", call(3, "echo", text="hi"))
    client.send("POST", call(4, "grow"))  # (tools/list_changed: on no stream of a request)
    client.send("POST", request(5, "prompts/get", name="review", arguments={"file": "a"}))
    client.send("POST", request(6, "resources/read", uri="notes://team/logo"))
    client.send("POST", request(7, "bogus/method"))
    client.send("POST", request(8, "ping"), accept="application/json")
    client.send("POST", request(9, "ping"), version="1999-01-01")
    client.send("GET", path="/elsewhere")
    client.send("DELETE")
    client.send("POST", request(10, "ping"))  # the session has ended
    client.connection.close()
    return client.said


def test_the_lean_server_says_over_http_what_the_sdk_server_says(sdk_http_server, http_server):
    sdk = http_transcript(sdk_http_server)
    assert sdk[1][:4] == ("POST", 200, "text/event-stream", True)
    assert [status for _, status, *_ in sdk] == [
        400, 200, 202, 200, 200, 200, 200, 200, 200, 406, 400, 404, 200, 404]  # fmt: skip
    assert http_transcript(http_server) == sdk
