"""The `mcp` SDK loads only when a server is configured: `bastion --version` and a whole
print-mode run with no server never import it (nor runtime.mcp's client), and with a
server configured it is imported (so the check can fail)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.mcp.conftest import stdio_server, write_config

RUN = """
import sys
from tui.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "runtime.mcp.client")))
print("LOADED", ",".join(loaded), file=sys.stderr)
sys.exit(code or 0)
"""


def loaded(out: subprocess.CompletedProcess[str]) -> list[str]:
    line = next(line for line in out.stderr.splitlines() if line.startswith("LOADED"))
    return [name for name in line.removeprefix("LOADED").strip().split(",") if name]


def run(b, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN, *args], cwd=b.cwd, env=b.env, capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_version_never_imports_the_sdk(bastion):
    out = run(bastion(), "--version")
    assert out.returncode == 0 and out.stdout.startswith("bastion ")
    assert loaded(out) == []


@pytest.mark.e2e
def test_a_print_run_without_servers_never_imports_it(loopback, bastion, tmp_path):
    b = bastion(loopback([{"text": "hi"}]))
    write_config(tmp_path / "config", {}, extra='theme = "bastion-dark"')
    out = run(b, "-p", "hi")
    assert out.returncode == 0, out.stderr
    assert "hi" in out.stdout and loaded(out) == []


@pytest.mark.e2e
def test_a_configured_server_imports_it(loopback, bastion, tmp_path):
    b = bastion(loopback([{"text": "hi"}]))
    write_config(tmp_path / "config", {"t": stdio_server()})
    out = run(b, "-p", "hi")
    assert out.returncode == 0, out.stderr
    assert {"mcp", "runtime.mcp.client"} <= set(loaded(out))
