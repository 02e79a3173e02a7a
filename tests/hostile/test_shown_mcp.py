"""Issue 34, item 9: an MCP server's bytes cannot stall a run, print on the terminal or
fill the disk.

A hostile server (`mcp_hostile_server.py`, on the lean test double that speaks the
MCP wire format as the SDK's server does) answers one call with a reply that is not
UTF-8 and another with a lone surrogate in its JSON, then never answers properly; a
third call floods its stderr. Through the real `bastion -p`: each call ends at once (the first with its
text, bytes replaced; the second with a line saying the reply could not be read),
far inside its `tool_timeout`; no SDK traceback reaches the terminal; the
server's stderr log stops at its cap with a line saying so.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.e2e import conftest as e2e

bastion, loopback = e2e.bastion, e2e.loopback  # the real command, a loopback model (fixtures)
pytestmark = pytest.mark.e2e

SERVER = Path(__file__).with_name("mcp_hostile_server.py")
TOOL_TIMEOUT = 20  # seconds: what each bad reply used to cost, the whole of it
LOG_CAP = 1024 * 1024  # runtime.mcp.errlog.LOG_CAP: bytes of a server's stderr kept


def call(call_id: str, tool: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


def configure(config_home: Path) -> None:
    path = config_home / "bastion" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "[mcp_servers.h]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\n"
        f"tool_timeout = {TOOL_TIMEOUT}\n"
    )


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_unreadable_replies_end_their_calls_at_once_with_no_traceback(loopback, bastion, tmp_path):
    server = loopback(
        [
            call("c1", "h__not_utf8"),
            call("c2", "h__surrogate"),
            call("c3", "h__echo", text="still here"),
            {"text": "done"},
        ]
    )
    b = bastion(server)
    configure(tmp_path / "config")
    started = time.monotonic()
    out = b.run("-p", "go", "--allow", "h__*", timeout=3 * TOOL_TIMEOUT + 30)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert took < TOOL_TIMEOUT, f"a call waited out its tool_timeout ({took:.1f} s)"
    told = tool_messages(server.requests()[-1])
    assert told[0] == "caf\ufffd \ufffd\ufffd"  # its text, the bytes that are not UTF-8 replaced
    assert "sent a reply that could not be read" in told[1]
    assert "lone leading surrogate" in told[1] and "the call was ended" in told[1]
    assert told[2] == "echo: still here"  # the server goes on
    assert "Traceback" not in out.stderr and "Failed to parse" not in out.stderr
    assert "Failed to parse JSONRPC message" in (b.home / "mcp" / "sdk.log").read_text()


def test_a_servers_stderr_log_stops_at_its_cap(loopback, bastion, tmp_path):
    server = loopback([call("c1", "h__flood", megabytes=3), {"text": "done"}])
    b = bastion(server)
    configure(tmp_path / "config")
    out = b.run("-p", "go", "--allow", "h__*")
    assert out.returncode == 0, out.stderr
    assert tool_messages(server.requests()[-1]) == ["flooded"]
    log = b.home / "mcp" / "h.log"
    assert LOG_CAP <= log.stat().st_size < LOG_CAP + 200
    assert log.read_bytes().rstrip().endswith(b"past its first 1,048,576 bytes is not kept]")
