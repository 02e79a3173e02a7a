"""End-to-end fixtures: the installed `bastion` command against a loopback server process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackProcess, LoopbackThread

BIN = Path(sys.executable).parent


def bastion_bin() -> str:
    path = BIN / "bastion"
    if not path.exists():
        pytest.fail(
            f"the bastion command is not installed next to {sys.executable}; "
            "run the README's test command (it installs the package)"
        )
    return str(path)


@dataclass
class Bastion:
    """Runs the real command with an isolated home, config and provider."""

    home: Path
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)

    def cmd(self, *args: str) -> list[str]:
        return [bastion_bin(), *args]

    def run(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        # No input: stdin is /dev/null, never the test runner's own (a pipe that may not end).
        stdin = subprocess.DEVNULL if input is None else None
        return subprocess.run(
            self.cmd(*args),
            input=input,
            stdin=stdin,
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env | (env or {}),
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.cmd(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
        )

    def json(self, *args: str, **kw) -> dict:
        out = self.run(*args, **kw)
        assert out.stdout.strip(), out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def loopback(tmp_path):
    """Start loopback servers (one per call) with the given turns; stopped after the test.
    Each runs on a thread of this process (`LoopbackThread`): the process under test is
    `bastion`, and a server process of its own per call cost ~20 s of the suite's CPU."""
    servers: list[LoopbackThread] = []

    def make(turns: list[dict]) -> LoopbackThread:
        server = LoopbackThread.start(turns, tmp_path / f"server{len(servers)}")
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def bastion(tmp_path):
    def make(server: LoopbackProcess | LoopbackThread | None = None) -> Bastion:
        cwd = tmp_path / "work"
        cwd.mkdir(exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "ANTHROPIC_", "BASTION_", "OLLAMA_"))
        }
        env.update(
            BASTION_HOME=str(tmp_path / "home"),
            XDG_CONFIG_HOME=str(tmp_path / "config"),
            BASTION_MODEL="openai/test-model",
            PYTHONUNBUFFERED="1",
        )
        if server is not None:
            env["OPENAI_BASE_URL"] = server.base_url
        return Bastion(tmp_path / "home", cwd, env)

    return make


@pytest.fixture(params=["sqlite", "postgresql"])
def team_store(request) -> str | None:
    """The store the real command keeps this test's session in: SQLite's file in its
    home, or (BASTION_STORE) a fresh PostgreSQL database of the session's server."""
    return request.getfixturevalue("pg_store_url") if request.param == "postgresql" else None
