"""Benchmark the command sandbox: what it adds to one run_command call.

    python tests/bench/bench_sandbox.py [--runs N]

Runs the same short command (``true``) through ``run_command`` unsandboxed and in
each sandboxed configuration, interleaved, N times each in a fresh workspace,
and prints the median wall-clock time per call, the time the sandbox adds and
the ratio to the unsandboxed run. The sandbox's cost is paid in the command's
supervisor (a namespace, a few mounts, a Landlock ruleset) and in bastion (the
per-call temp dir, looking for deny-listed names in the workspace).

Not collected by pytest: no test functions, and main() only runs as a script.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools import ToolContext, Workspace, run_tool
from tools.sandbox import SandboxMode, SandboxPolicy, probe

CONFIGS: list[tuple[str, SandboxPolicy | None]] = [
    ("unsandboxed", None),
    ("workspace-write", SandboxPolicy(SandboxMode.WORKSPACE_WRITE)),
    ("workspace-write + network", SandboxPolicy(SandboxMode.WORKSPACE_WRITE, network=True)),
    ("read-only", SandboxPolicy(SandboxMode.READ_ONLY)),
]


def sample_workspace(root: Path) -> None:
    """A small project: 200 folders, a .git/hooks, an .env to hide."""
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".env").write_text("TOKEN=x\n")
    for i in range(200):
        folder = root / f"pkg{i // 20}" / f"mod{i}"
        folder.mkdir(parents=True)
        (folder / "a.py").write_text("x = 1\n")


async def one(ctx: ToolContext) -> float:
    started = time.perf_counter()
    result = await run_tool("run_command", {"argv": ["true"]}, ctx)
    elapsed = time.perf_counter() - started
    if not result.ok or result.data["exit_code"] != 0:
        raise SystemExit(f"the command failed: {result.model_text()}")
    return elapsed


async def measure(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name, _ in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        sample_workspace(root)
        (Path(tmp) / "artifacts").mkdir()
        with Workspace.open(root) as ws:
            base = ToolContext(ws, artifacts_dir=Path(tmp) / "artifacts")
            for _name, policy in CONFIGS:  # warm up each path once
                await one(base._replace(sandbox=policy))
            for _ in range(runs):
                for name, policy in CONFIGS:
                    times[name].append(await one(base._replace(sandbox=policy)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    support = probe()
    print(f"sandbox: {support.describe()}")
    if not support.available:
        print("no sandbox on this machine: nothing to measure")
        return
    times = asyncio.run(measure(args.runs))
    base = statistics.median(times["unsandboxed"])
    print(f"run_command `true`, median of {args.runs} interleaved runs")
    print(f"{'configuration':<28}{'ms/call':>9}{'added ms':>10}{'ratio':>8}")
    for name, _ in CONFIGS:
        median = statistics.median(times[name])
        added = (median - base) * 1000
        print(f"{name:<28}{median * 1000:>9.1f}{added:>10.1f}{median / base:>8.2f}")


if __name__ == "__main__":
    main()
