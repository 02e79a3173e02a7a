"""The deferred catalog through the real command (runtime.mcp.catalog): 40 MCP tools,
and the loopback provider records what each request offered. The first request offers
the search tool and the built-ins, no MCP schema; the model searches and loads a tool;
`bastion -p` is SIGKILLed right after the search's result is committed; `bastion -p
--resume` offers the loaded tool in its first request and the call runs."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import call, stdio_server, tool_messages, write_config

pytestmark = pytest.mark.e2e
SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d42"
SEARCH = "mcp_search_tools"
CATALOG = {"command": sys.executable, "args": [str(Path(__file__).with_name("catalog_server.py"))]}


def offered(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def tools_bytes(request: dict) -> int:
    return len(json.dumps(request["tools"], separators=(",", ":")).encode())


def test_search_load_sigkill_resume_then_call(loopback, bastion, tmp_path):
    server = loopback(
        [
            {"unless": ["t__echo: Say"], **call("c1", SEARCH, query="say text back")},
            {"unless": ["echo: after the kill"], **call("c2", "t__echo", text="after the kill")},
            {"text": "done"},
        ]
    )
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server(), "gh": CATALOG})
    killed = b.run("-p", "go", "--session-id", SID, "--allow", "t__echo",
                   env={"BASTION_FAILPOINT": "call.result:1"})  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    (first,) = server.requests()
    assert SEARCH in offered(first) and not [n for n in offered(first) if "__" in n]

    resumed = b.run("-p", "--resume", SID, "--allow", "t__echo")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout == "done\n"
    _, again, last = server.requests()
    assert "t__echo" in offered(again) and SEARCH in offered(again)  # loaded, from the store
    assert "t__echo: Say `text` back." in tool_messages(again)[0]["content"]
    assert tool_messages(last)[-1]["content"] == "echo: after the kill"


def test_the_first_request_is_a_fraction_of_every_schema(loopback, bastion, tmp_path):
    deferred = loopback([{"text": "ok"}])
    write_config(tmp_path / "config", {"t": stdio_server(), "gh": CATALOG})
    assert bastion(deferred).run("-p", "hi").returncode == 0
    every = loopback([{"text": "ok"}])
    write_config(
        tmp_path / "config", {"t": stdio_server(), "gh": CATALOG}, extra="mcp_tool_search = false"
    )
    assert bastion(every).run("-p", "hi").returncode == 0
    (small,), (full,) = deferred.requests(), every.requests()
    assert len([n for n in offered(full) if "__" in n]) == 40
    assert set(offered(small)) == {n for n in offered(full) if "__" not in n} | {SEARCH}
    assert tools_bytes(small) < tools_bytes(full) * 0.5
