"""End-to-end fixtures: the installed `bastion` command against a loopback server process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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
class Loopback:
    dir: Path
    proc: subprocess.Popen[bytes]
    port: int
    record: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]


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
        return subprocess.run(
            self.cmd(*args),
            input=input,
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


def start_loopback(tmp: Path, turns: list[dict]) -> Loopback:
    script = tmp / "turns.json"
    script.write_text(json.dumps(turns))
    port_file, record = tmp / "port", tmp / "requests.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtime.testing.server",
            "--script",
            str(script),
            "--port-file",
            str(port_file),
            "--record",
            str(record),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 15
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"loopback server did not start: {proc.stderr.read().decode()}")
        time.sleep(0.02)
    return Loopback(tmp, proc, int(port_file.read_text().strip()), record)


@pytest.fixture
def loopback(tmp_path):
    servers: list[Loopback] = []

    def make(turns: list[dict]) -> Loopback:
        server_dir = tmp_path / f"server{len(servers)}"
        server_dir.mkdir()
        server = start_loopback(server_dir, turns)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.proc.kill()


@pytest.fixture
def bastion(tmp_path):
    def make(server: Loopback | None = None) -> Bastion:
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
