"""MCP fixtures: the real command (tests/e2e's fixtures) with MCP servers in its config,
and the test server over stdio or streamable HTTP: tests/mcp/lean_server.py (the real
wire format without the SDK's ~0.7 s of CPU a start), or for the interop tests
tests/mcp/mcp_server.py, the same server written with the official SDK."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import bastion, loopback  # noqa: F401 (fixtures)

SERVER = Path(__file__).with_name("lean_server.py")
SDK_SERVER = Path(__file__).with_name("mcp_server.py")


def toml_value(value: object) -> str:
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    return json.dumps(value)


def write_config(config_home: Path, servers: dict[str, dict[str, object]], extra: str = "") -> None:
    """The user's config.toml with these [mcp_servers.NAME] tables."""
    lines = [extra] if extra else []
    for name, table in servers.items():
        lines.append(f"[mcp_servers.{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
    path = config_home / "bastion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def stdio_server(*args: str, **table: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SERVER), "stdio", *args], **table}


def sdk_stdio_server(*args: str, **table: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SDK_SERVER), "stdio", *args], **table}


@pytest.fixture
def http_server(tmp_path):
    """The test server on loopback (streamable HTTP): yields its URL."""
    yield from _serve(tmp_path, [str(SERVER), "http"])


@pytest.fixture
def sdk_http_server(tmp_path):
    """The SDK's test server on loopback (streamable HTTP): yields its URL."""
    yield from _serve(tmp_path / "sdk", [str(SDK_SERVER), "http"])


@pytest.fixture
def oauth_server(tmp_path):
    """tests/mcp/oauth_server.py on loopback (OAuth in front): yields its URL."""
    yield from _serve(tmp_path, [str(Path(__file__).with_name("oauth_server.py"))])


def _serve(tmp_path: Path, argv: list[str]):
    tmp_path.mkdir(exist_ok=True)
    port_file = tmp_path / "mcp-port"
    log = (tmp_path / "mcp-http.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, *argv, "--port-file", str(port_file)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the MCP test server did not start: {log.name}")
        time.sleep(0.02)  # (poll interval)
    yield f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def call(call_id: str, tool: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]}


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]
