"""The loopback server as a separate process (or, for tests, a thread: `LoopbackThread`),
for tests and benchmarks of the real command.

with LoopbackProcess.start(turns, workdir) as server:
    env["OPENAI_BASE_URL"] = server.base_url
    ...
    server.requests()   # every chat request body it was sent, in order
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from runtime.testing.server import LoopbackServer


@dataclass
class _Loopback:
    """What a test reads of a loopback server, wherever it runs: its URL and records."""

    port: int
    record: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def headers(self) -> list[dict[str, Any]]:
        """Each request's path and headers (names lower-cased), in order."""
        path = self.record.with_name("headers.jsonl")
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass
class LoopbackProcess(_Loopback):
    proc: subprocess.Popen[bytes]

    @classmethod
    def start(
        cls, turns: Sequence[dict[str, Any]], workdir: Path, *, timeout: float = 15.0
    ) -> LoopbackProcess:
        """Write `turns` to a script in `workdir`, start the server, wait for its port."""
        workdir.mkdir(parents=True, exist_ok=True)
        script, port_file = workdir / "turns.json", workdir / "port"
        record = workdir / "requests.jsonl"
        script.write_text(json.dumps(list(turns)))
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "runtime.testing.server", "--script", str(script),
             "--port-file", str(port_file), "--record", str(record),
             "--record-headers", str(workdir / "headers.jsonl")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"the loopback server did not start: {err.strip()}")
            time.sleep(0.02)
        return cls(int(port_file.read_text().strip()), record, proc)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@dataclass
class LoopbackThread(_Loopback):
    """`LoopbackProcess`'s interface over the server on a thread of this process.

    For tests whose subject is the `bastion` process, not the server: the server
    process costs an interpreter's start-up (0.08 s of CPU; the suite starts ~280),
    where a thread costs nothing to start. What it records goes to the same files, so
    `requests()` and `headers()` read the same. Benchmarks keep the process, so the
    server's CPU is never the measuring process's or its GIL's.
    """

    server: LoopbackServer

    @classmethod
    def start(cls, turns: Sequence[dict[str, Any]], workdir: Path) -> LoopbackThread:
        """Serve `turns` on a thread; its records in `workdir`, as the process's."""
        from runtime.testing.server import LoopbackServer

        workdir.mkdir(parents=True, exist_ok=True)
        record = workdir / "requests.jsonl"
        server = LoopbackServer(
            list(turns), record=record, record_headers=workdir / "headers.jsonl"
        )
        server.start()
        return cls(server.port, record, server)

    def stop(self) -> None:
        self.server.stop()


def kill_mid_stream(
    proc: subprocess.Popen[str], rng: Any, *, after: int = 10, spread: float = 0.6
) -> tuple[list[tuple[float, str]], float]:
    """SIGKILL a `bastion -p --output-format stream-json` process at a random moment of
    its answer: after `after` text deltas, then 0 to `spread` seconds more. Returns
    each delta shown (its arrival time, its text) and the time of the kill, so a test
    can compare what was shown with what the store kept."""
    import threading

    deltas: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith('{"type": "text.delta"'):
                deltas.append((time.monotonic(), json.loads(line)["text"]))

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 30
    while len(deltas) < after and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, spread))
    killed_at = time.monotonic()
    proc.kill()
    proc.wait()
    reader.join()
    return deltas, killed_at
