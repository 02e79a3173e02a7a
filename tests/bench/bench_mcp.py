"""Benchmark: what MCP costs at launch, each figure beside its reference.

    python tests/bench/bench_mcp.py [--runs 15] [--baseline BIN]

- `bastion --version` with the `mcp` SDK installed vs `python -c pass`;
- `bastion -p` (one scripted turn from the loopback server) with no MCP server
  configured vs the same with `--baseline BIN` (a bastion installed without the
  `mcp` extra, e.g. main's checkout), when given;
- the same with one stdio MCP server configured (tests/mcp/mcp_server.py) vs none:
  what a configured server adds (its start and tool listing, before the request);
- `import httpx` as bastion imports it (its command-line tool left out, see
  runtime/__init__.py) vs plain, with click installed (the `mcp` extra brings it).

Medians of `--runs` fresh processes each, interleaved so load hits both alike.
Run by `nox -s bench`; not collected by pytest. No network: loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runtime.testing.process import LoopbackProcess

BIN = Path(sys.executable).parent
SERVER = Path(__file__).resolve().parents[1] / "mcp" / "mcp_server.py"


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return elapsed


def env_for(base: Path, server: LoopbackProcess | None, with_mcp: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASTION_"))}
    config = base / ("config-mcp" if with_mcp else "config")
    (config / "bastion").mkdir(parents=True, exist_ok=True)
    table = {"command": sys.executable, "args": [str(SERVER), "stdio"]}
    text = f"[mcp_servers.t]\ncommand = {json.dumps(table['command'])}\nargs = {json.dumps(table['args'])}\n"
    (config / "bastion" / "config.toml").write_text(text if with_mcp else "")
    env.update(BASTION_HOME=str(base / "home"), XDG_CONFIG_HOME=str(config),
               BASTION_MODEL="openai/bench")  # fmt: skip
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    return env


def pair(runs: int, first: list[str], second: list[str], env1: dict[str, str],
         env2: dict[str, str], cwd: Path) -> tuple[float, float]:  # fmt: skip
    a, b = [], []
    for _ in range(runs):
        a.append(timed(first, env1, cwd))
        b.append(timed(second, env2, cwd))
    return statistics.median(a), statistics.median(b)


def row(what: str, ours: float, reference: float, ref_name: str) -> None:
    print(f"| {what} | {ours * 1000:.0f} ms | {ref_name} {reference * 1000:.0f} ms | "
          f"{ours / reference:.2f}x |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", help="a bastion command installed without the mcp extra")
    opts = parser.parse_args()
    bastion = str(BIN / "bastion")
    base = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    work = base / "work"
    work.mkdir()
    print("| row | ours | reference | ratio |\n| --- | --- | --- | --- |")
    quiet = env_for(base, None, False)
    ours, ref = pair(
        opts.runs, [bastion, "--version"], [sys.executable, "-c", "pass"], quiet, quiet, work
    )
    row("`bastion --version` (mcp installed)", ours, ref, "`python -c pass`")
    turns = [{"text": "hi"}] * (opts.runs * 4)
    with LoopbackProcess.start(turns, base / "loopback") as server:
        plain, configured = env_for(base, server, False), env_for(base, server, True)
        prompt = ["-p", "hi"]
        if opts.baseline:
            ours, ref = pair(
                opts.runs, [bastion, *prompt], [opts.baseline, *prompt], plain, plain, work
            )
            row("`bastion -p`, no MCP server configured", ours, ref, "without the extra")
        ours, ref = pair(opts.runs, [bastion, *prompt], [bastion, *prompt], configured, plain, work)
        row("`bastion -p`, one stdio MCP server configured", ours, ref, "none configured")
    guarded = "import sys; sys.modules['httpx._main'] = None; import httpx"
    ours, ref = pair(opts.runs, [sys.executable, "-c", guarded], [sys.executable, "-c", "import httpx"],
                     quiet, quiet, work)  # fmt: skip
    row("`import httpx` as bastion does (click installed)", ours, ref, "plain `import httpx`")


if __name__ == "__main__":
    main()
