"""The network allow-list end to end, on the real kernel: a sandboxed command (through
run_command, as the runtime runs it) reaches an allowed host through bastion's
proxy and its bridge, is refused any other host with the host named in the result,
and cannot open a socket of its own. "pypi.org" is a loopback stand-in here: the
proxy is given a resolver that sends it to a local server (the one test seam)."""

from __future__ import annotations

import http.server
import os
import pathlib
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tools import ToolContext, run_tool
from tools.netproxy import NetProxy
from tools.netrules import parse_hosts
from tools.sandbox import PROBE_ENV, SandboxMode, SandboxPolicy, probe

SUPPORT = probe()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock and SUPPORT.namespace),
    reason=f"no private mount and network namespace here: {SUPPORT.describe()}",
)
HOSTS = ("pypi.org",)
POLICY = SandboxPolicy(SandboxMode.WORKSPACE_WRITE, hosts=HOSTS)
CURL = shutil.which("curl")


@pytest.fixture
def hot_path() -> str:
    return "either"


class Simple(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"stand-in for {self.headers.get('Host')} {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Simple)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxied(ctx: ToolContext, stand_in: int) -> Iterator[ToolContext]:
    async def resolve(host: str, port: int) -> list[tuple[str, int]]:
        return [("127.0.0.1", stand_in)]  # "pypi.org" is the loopback stand-in

    folder = tempfile.mkdtemp(prefix="bastion-proxy-")
    proxy = NetProxy(parse_hosts(list(HOSTS)), os.path.join(folder, "p"), resolve=resolve)
    env = {"PATH": os.environ["PATH"], "HOME": str(ctx.workspace.root), "LANG": "C.UTF-8"}
    yield ctx._replace(sandbox=POLICY, env=env, proxy=proxy)
    proxy.close()
    shutil.rmtree(folder)


async def run(ctx: ToolContext, command: str) -> Any:
    result = await run_tool("run_command", {"command": command, "timeout_ms": 30000}, ctx)
    return result


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_curl_reaches_the_allowed_host_and_no_other(proxied: ToolContext) -> None:
    ok = await run(proxied, "curl -sS --max-time 10 http://pypi.org/simple/")
    assert ok.ok and ok.data["exit_code"] == 0, ok.model_text()
    assert "stand-in for pypi.org /simple/" in ok.data["output"]
    assert "network_refused" not in ok.data
    assert ok.data["sandbox"]["hosts"] == ["pypi.org"]
    assert ok.data.get("processes_killed", 0) == 0, ok.data  # the bridge is not counted

    refused = await run(proxied, "curl -sS --max-time 10 https://example.com/")
    assert refused.data["exit_code"] != 0, refused.model_text()
    assert refused.data["network_refused"] == [
        {"host": "example.com:443", "why": "not in network_hosts", "times": 1}
    ]
    lines = [ln for ln in refused.model_text().splitlines() if "example.com:443" in ln]
    assert lines == [
        "[network: bastion's proxy refused example.com:443 (not in network_hosts); "
        "only the user can add it to network_hosts]"
    ]


async def test_python_urllib_goes_through_the_proxy(proxied: ToolContext) -> None:
    script = (
        "import urllib.request as u\n"
        "print(u.urlopen('http://pypi.org/x', timeout=10).read().decode())\n"
        "try:\n    u.urlopen('http://evil.example:8080/', timeout=10)\n"
        "except Exception as e:\n    print('refused', e)\n"
    )
    (pathlib.Path(proxied.workspace.root) / "get.py").write_text(script)
    result = await run(proxied, f"{sys.executable} -I get.py")
    assert "stand-in for pypi.org /x" in result.data["output"], result.model_text()
    assert "refused HTTP Error 403" in result.data["output"]
    assert [r["host"] for r in result.data["network_refused"]] == ["evil.example:8080"]


async def test_direct_sockets_and_own_proxies_get_nowhere(
    proxied: ToolContext, stand_in: int
) -> None:
    """The stand-in's own address, directly, and a proxy the command names itself
    (the host's loopback is not the command's): both fail; nothing was refused by
    the proxy, as nothing reached it."""
    script = (
        "import socket, urllib.request as u, os\n"
        f"for addr in [('127.0.0.1', {stand_in}), ('1.1.1.1', 443)]:\n"
        "    try:\n        socket.create_connection(addr, timeout=3); print('CONNECTED', addr)\n"
        "    except OSError as e:\n        print('no', addr, e.errno)\n"
        f"os.environ['http_proxy'] = 'http://127.0.0.1:{stand_in}'\n"
        "try:\n    u.urlopen('http://pypi.org/', timeout=5); print('FETCHED')\n"
        "except Exception as e:\n    print('no own proxy', type(e).__name__)\n"
    )
    (pathlib.Path(proxied.workspace.root) / "direct.py").write_text(script)
    result = await run(proxied, f"{sys.executable} -I direct.py")
    out = result.data["output"]
    assert "CONNECTED" not in out and "FETCHED" not in out, out
    assert out.count("no (") == 2 and "no own proxy" in out, out
    assert "network_refused" not in result.data


async def test_without_a_proxy_the_network_stays_off(ctx: ToolContext, stand_in: int) -> None:
    use = ctx._replace(sandbox=POLICY)
    script = f"import socket; socket.create_connection(('127.0.0.1', {stand_in}), timeout=3)"
    result = await run(use, f'{sys.executable} -I -c "{script}"')
    assert result.data["exit_code"] != 0
    assert "hosts" not in result.data["sandbox"]


async def test_without_a_namespace_the_list_cannot_apply(
    proxied: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network namespace (simulated): no bridge can be made, so the network stays
    off and the result says so in one note; the proxy is never asked."""
    monkeypatch.setenv(PROBE_ENV, "no-namespace")
    result = await run(
        proxied, f"{sys.executable} -I -c 'import os; print(os.environ.get(\"HTTPS_PROXY\"))'"
    )
    assert result.data["output"].strip() == "None"
    notes = result.data["sandbox"]["notes"]
    assert [n for n in notes if "network_hosts" in n] == [
        "network_hosts needs a network namespace, which this machine does not allow: "
        "the network is off"
    ]
    assert proxied.proxy is not None and not proxied.proxy.running
