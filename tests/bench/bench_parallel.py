"""Bench: 4 reads of one turn run together vs 2 reads run one after another.

    python tests/bench/bench_parallel.py [--repeat 5] [--latency 0.25]

The harness runs in this process with the real OpenAI-compatible provider against
the loopback server (runtime.testing.process); each measurement is one `submit`
→ run completed: a model request that asks for the reads in one response, the
reads, and a second request that gets their results. The reference is the same
with `parallel_calls=1` (calls one after another) and half the reads.

How the reads are made slow, honestly: reading a local file takes microseconds,
so two rows.
- latency: each read_file waits `--latency` seconds before it reads (a wrapper
  around the real workspace tools in this file; it stands in for storage or
  network latency, where overlapping pays most). Target: ratio < 1.0.
- cpu: real search_files calls over a generated tree of big files, no delay
  added. The searches run in threads, so on N free cores 4 overlapped cost
  about what 4/N sequential ones do: on a 2-core machine shared with other work
  this ratio lands near or above 1.0 and is printed for information, not judged.

Prints one line per row (`ratio = parallel 4 / sequential 2`, medians) and exits 1
if the latency row misses its target. Run by `nox -s bench`. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from runtime import Harness  # noqa: E402
from runtime.model.tools import ToolOutcome  # noqa: E402
from runtime.run.deps import LoopSettings  # noqa: E402
from runtime.run.toolbox import WorkspaceToolbox  # noqa: E402
from runtime.setup.load import load_config, model_resolver  # noqa: E402
from runtime.testing.process import LoopbackProcess  # noqa: E402


@dataclass
class SlowReads:
    """The real workspace tools; read_file first waits `latency` seconds."""

    inner: WorkspaceToolbox
    latency: float

    def specs(self) -> Any:
        return self.inner.specs()

    def info(self, name: str) -> Any:
        return self.inner.info(name)

    async def run(self, name: str, arguments: str, on_output: Any = None,
                  on_start: Any = None, sandbox: str | None = None) -> ToolOutcome:  # fmt: skip
        if name == "read_file":
            await asyncio.sleep(self.latency)  # the simulated tool's latency, the thing measured
        return await self.inner.run(name, arguments, on_output, on_start)

    def close(self) -> None:
        self.inner.close()


def script(calls: list[tuple[str, dict[str, Any]]], repeat: int) -> list[dict[str, Any]]:
    turn = {"tool_calls": [{"id": f"call_{i}", "name": n, "arguments": a}
                           for i, (n, a) in enumerate(calls)]}  # fmt: skip
    return [turn, {"text": "done"}] * repeat


async def measure(
    work: Path, calls: list[tuple[str, dict[str, Any]]], parallel: int, repeat: int,
    latency: float | None,
) -> list[float]:  # fmt: skip
    server = LoopbackProcess.start(
        script(calls, repeat + 1), work / f"server-{parallel}-{calls[0][0]}"
    )
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "bench"}
    home = work / f"home-{parallel}-{calls[0][0]}"

    def toolbox(conversation: Any) -> Any:
        inner = WorkspaceToolbox(conversation.cwd, home / "artifacts")
        return inner if latency is None else SlowReads(inner, latency)

    harness = await Harness.open(
        home / "bastion.sqlite",
        resolve_model=model_resolver(load_config(str(work / "tree"), env), env),
        toolbox_factory=toolbox,
        loop_settings=LoopSettings(parallel_calls=parallel),
    )
    times = []
    try:
        for i in range(repeat + 1):  # the first warms imports and the connection
            conv = await harness.create_conversation(  # each its own: the context stays small
                str(work / "tree"), settings={"model": "openai/bench", "approval_mode": "auto-edit"}
            )
            await harness.drive(conv.id, interactive=False)
            started = time.perf_counter()
            item = await harness.submit(conv.id, f"read them ({i})")
            run = await harness.wait(item.id, conv.id)
            if run.state != "completed":
                raise SystemExit(f"bench run ended {run.state}: {run.error}")
            if i:
                times.append(time.perf_counter() - started)
    finally:
        await harness.close()
        server.stop()
    return times


def make_tree(root: Path) -> None:
    root.mkdir(parents=True)
    line = "".join(f"word{i} " for i in range(30)) + "\n"
    for d in range(4):
        (root / f"d{d}").mkdir()
        for f in range(40):
            (root / f"d{d}" / f"f{f}.txt").write_text(line * 1500)  # ~280 KB each
    for name in "abcd":
        (root / f"{name}.txt").write_text(line * 50)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bastion-bench-parallel-") as tmp:
        work = Path(tmp)
        make_tree(work / "tree")
        reads = [("read_file", {"path": f"{n}.txt"}) for n in "abcd"]
        searches = [("search_files", {"pattern": f"word{i}9 word{i + 1}0", "path": f"d{i}",
                                      "max_results": 5}) for i in range(4)]  # fmt: skip
        failed = False
        for row, calls, latency in (("latency", reads, args.latency), ("cpu", searches, None)):
            four = await measure(work, calls, 4, args.repeat, latency)
            two = await measure(work, calls[:2], 1, args.repeat, latency)
            p, s = statistics.median(four), statistics.median(two)
            ratio = p / s
            verdict = ""
            if row == "latency":
                verdict = "  ok (< 1.0)" if ratio < 1.0 else "  MISSED (target < 1.0)"
                failed = ratio >= 1.0
            how = f"{latency:.2f} s per read" if latency else "real searches, no delay"
            print(
                f"parallel reads [{row}: {how}]  4 together {p * 1000:7.1f} ms  "
                f"2 in a row {s * 1000:7.1f} ms  ratio {ratio:.2f}{verdict}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
