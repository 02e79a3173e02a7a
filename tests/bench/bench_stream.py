"""Benchmark: `bastion -p` streaming a 200 KB answer vs a bare httpx client, whole processes.

    python tests/bench/bench_stream.py [--runs 7] [--size 200000] [--chunk 4]
                                       [--only stream,word]

Two rows: the 200 KB answer (target <= 1.5x) and a one-word answer, what a script
calling `bastion -p` pays per call (target <= 1.5x, issue 36; it was 2x in issue 28).

Both consume the same loopback server (runtime.testing.server) serving the same
answer in the same SSE events; each measurement is one fresh process, from
exec to exit, and the figure is the ratio of medians. Run by `nox -s bench`.
Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rows import record

from runtime.testing.process import LoopbackProcess

BARE_CLIENT = r"""
import json, sys, httpx
url = sys.argv[1]
body = {"model": "bench", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "go"}]}
parts = []
with httpx.Client(timeout=60) as client:
    with client.stream("POST", url + "/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices", ()):
                content = choice.get("delta", {}).get("content")
                if content:
                    parts.append(content)
text = "".join(parts)
sys.stdout.write(text + "\n")
"""


def answer_text(size: int) -> str:
    words = ("stream", "durable", "ledger", "answer", "tokens", "bastion", "model", "commit")
    out, i = [], 0
    while sum(map(len, out)) < size:
        out.append(words[i % len(words)] + (" " if i % 13 else ".\n"))
        i += 1
    return "".join(out)[:size]


def timed(cmd: list[str], env: dict[str, str], expect: str) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if out.returncode != 0 or out.stdout != expect + "\n":
        raise SystemExit(f"{cmd[0]} failed (exit {out.returncode}): {out.stderr[-500:]}")
    return elapsed


def measure(text: str, chunk: int, runs: int, target: float, what: str) -> None:
    """Interleaved whole-process runs of `bastion -p` and the bare client on `text`."""
    bastion = str(Path(sys.executable).parent / "bastion")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        turns = [{"text": text, "chunk_size": chunk}] * (2 * runs + 2)
        server = LoopbackProcess.start(turns, tmp / "server")
        base_url = server.base_url
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASTION_"))}
        # As a user has it: bytecode cached (the warm-up runs write it), not compiled per run.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            OPENAI_BASE_URL=base_url,
            BASTION_HOME=str(tmp / "home"),
            XDG_CONFIG_HOME=str(tmp / "config"),
        )
        bare_cmd = [sys.executable, "-c", BARE_CLIENT, base_url]
        bastion_cmd = [bastion, "-p", "go", "--model", "openai/bench"]
        try:
            timed(bare_cmd, env, text)  # warm both (imports, page cache, store file)
            timed(bastion_cmd, env, text)
            bare, ours = [], []
            for i in range(runs):
                pair = [(bare, bare_cmd), (ours, bastion_cmd)]
                for sink, cmd in pair if i % 2 == 0 else reversed(pair):
                    sink.append(timed(cmd, env, text))
        finally:
            server.stop()
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"{what}, median of {runs} whole-process runs")
    print(f"  bare httpx client : {statistics.median(bare) * 1000:8.0f} ms")
    print(f"  bastion -p        : {statistics.median(ours) * 1000:8.0f} ms")
    verdict = "meets" if ratio <= target else "MISSES"
    print(f"  ratio bastion/bare: {ratio:.2f}x  (target <= {target:g}x: {verdict})")
    record(
        f"`bastion -p`: {what} (whole process, median of {runs})",
        f"{statistics.median(ours) * 1000:.0f} ms",
        f"bare httpx POST in a fresh python: {statistics.median(bare) * 1000:.0f} ms",
        ratio,
        target,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=4, help="characters per SSE event")
    parser.add_argument("--only", default="stream,word", help="rows: stream, word")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "stream" in only:
        events = -(-args.size // args.chunk)
        what = f"stream {args.size // 1000} KB answer in {events} SSE events"
        measure(answer_text(args.size), args.chunk, args.runs, 1.5, what)
    if "word" in only:
        # What scripts and CI loops pay per call (issues 28, 36): start, one request, exit.
        measure("Hello.", 8, args.runs, 1.5, "a one-word answer (`bastion -p go`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
