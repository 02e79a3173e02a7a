"""Benchmark: the app while an answer streams, and a long session, each beside its reference.

    python tests/bench/bench_live.py [--runs 3] [--only cpu,echo,long]

- cpu: the CPU time (user + system, from /proc) of the app and every process under it
  (its harness process and renderer) while a slow answer streams at 400 chars/s for
  15 s (20 events a second), the app opened and settled first; beside it the same
  stream through `bastion -p` (its CPU less that of a one-word answer: its start-up
  and exit) and the settled app doing nothing for as long. Target: at most 1.5 s per 15 s.
- echo: key echo p50/p99 while a 2 MB answer streams vs the idle app's, with the
  machine's load beside it, and the medians beside a minimal Textual app's (an
  Input). Targets: p99 at most 2x the idle p99; the larger median (streaming or
  idle) at most 2x the minimal app's.
- long: a session of 2,000 turns with tool calls (written with the store's own
  transaction mutations) against one of 20: open it (`bastion -r`), scroll to the top
  (Home, earlier entries mounted as it goes), find a word in the transcript, resume
  (a prompt sent and its answer on screen); the time of each step and the RSS of all
  the app's processes after it. Reported, no target.

Every run is a fresh process against `runtime.testing`'s loopback server; nothing
touches the network. Run by `nox -s bench`; not collected by pytest.
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

import bench_app
from bench_app import BASTION, MODEL, SIZE, environment, fresh, percentile, terminal, verdict
from long_session import bench_long
from rows import record
from terminal import Terminal, cpu_seconds, markdown_answer, wait_idle

from runtime.testing.process import LoopbackProcess

RATE = 400  # characters a second
EVENTS = 20  # events a second
SECONDS = 15.0
CPU_TARGET = 1.5  # seconds of CPU per 15 s of stream


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} cores"


# --- CPU while a slow answer streams ----------------------------------------------


def slow_answer() -> str:
    """About RATE * SECONDS characters of markdown, ending in a line to look for."""
    text = markdown_answer(int(RATE * SECONDS) - 200)
    return text[: int(RATE * SECONDS) - 20].rstrip() + "\n\nSLOW END\n"


def slow_turn() -> dict[str, object]:
    return {"text": slow_answer(), "chunk_size": RATE // EVENTS, "delay_ms": 1000 / EVENTS}


def app_cpu(base: Path, server: LoopbackProcess) -> tuple[float, float]:
    """The app opened and settled, then `go` sent: (CPU seconds of its processes from the
    key to the answer's end on screen with the run done, the wall time of that)."""
    run = fresh(base, "cpu")
    with terminal(run) as term:
        term.start([BASTION, "--model", MODEL], environment(run / "home", server), run / "work",
                   SIZE)  # fmt: skip
        pid = term.app_pid()
        term.wait_for(lambda s: "Ask Bastion" in s and "ctx " in s, "the open session", 60)
        wait_idle(pid)
        before, start = cpu_seconds(pid), time.monotonic()
        term.send("go", literal=True)
        term.send("Enter")
        done, _ = term.wait_for(
            lambda s: "SLOW END" in s and "done" in s, "the answer's end", 120, poll=0.1
        )
        return cpu_seconds(pid) - before, done - start


def idle_cpu(base: Path, seconds: float) -> float:
    """The settled app with an empty session, doing nothing for `seconds`: its CPU."""
    run = fresh(base, "idle")
    with terminal(run) as term:
        term.start([BASTION, "--model", MODEL], environment(run / "home", None), run / "work",
                   SIZE)  # fmt: skip
        pid = term.app_pid()
        term.wait_for(lambda s: "Ask Bastion" in s and "ctx " in s, "the open session", 60)
        wait_idle(pid)
        before = cpu_seconds(pid)
        time.sleep(seconds)  # the idle span whose CPU is measured
        return cpu_seconds(pid) - before


def print_cpu(base: Path, server: LoopbackProcess) -> float:
    """`bastion -p go` once: the CPU time of its whole process (from wait4)."""
    run = fresh(base, "print")
    proc = subprocess.Popen(
        [BASTION, "-p", "go", "--model", MODEL],
        env=environment(run / "home", server),
        cwd=run / "work",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"bastion -p failed (exit {proc.returncode})")
    return usage.ru_utime + usage.ru_stime


def bench_cpu(base: Path, runs: int) -> None:
    """In each round `bastion -p` on the slow stream, then on a one-word answer (its
    start-up and exit: text mode prints the answer at the end, so its CPU while
    streaming is the difference), then the app on the slow stream."""
    apps, walls, prints = [], [], []
    turns = [slow_turn(), {"text": "ok"}, slow_turn()] * runs
    with LoopbackProcess.start(turns, fresh(base, "server")) as server:
        for _ in range(runs):
            streamed = print_cpu(base, server)
            prints.append(max(streamed - print_cpu(base, server), 0.01))
            cpu, wall = app_cpu(base, server)
            apps.append(cpu)
            walls.append(wall)
    idle = idle_cpu(base, statistics.median(walls))
    ours, ref, wall = statistics.median(apps), statistics.median(prints), statistics.median(walls)
    per15 = ours * SECONDS / wall
    detail = f"runs {', '.join(f'{c:.2f}' for c in apps)} s; idle app {idle:.2f} s; {load()}"
    print(
        f"  app CPU while a {RATE} chars/s answer streams ({EVENTS} events/s, {wall:.1f} s): "
        f"{ours:.2f} s ({per15:.2f} s per 15 s) | bastion -p: {ref:.2f} s | {ours / ref:.2f}x "
        f"| <= {CPU_TARGET} s per 15 s: {verdict(per15 <= CPU_TARGET)} ({detail})",
        flush=True,
    )
    record(
        f"app CPU while a {RATE} chars/s answer streams, per 15 s (all its processes)",
        f"{per15:.2f} s",
        f"bastion -p: {ref * SECONDS / wall:.2f} s; idle app {idle * SECONDS / wall:.2f} s",
        ours / ref,
        None,
        meets=per15 <= CPU_TARGET,
        note=f"<= {CPU_TARGET} s",
    )


# --- key echo while a 2 MB answer streams ------------------------------------------


def bench_echo(base: Path, runs: int) -> None:
    """bench_app's echo measurement (keys through one tmux control client while the app
    streams 2 MB, `runs` times, pooled; then as many on the settled idle app), recorded
    as the ratio of the p99s with the load beside it."""
    before = load()
    busy, idle, minimal = bench_app.bench_echo(base, runs)
    p99, idle99 = percentile(busy, 0.99), percentile(idle, 0.99)
    ratio = p99 / idle99
    print(
        f"  key echo p99 while streaming 2 MB: {p99 * 1000:.0f} ms | idle app: "
        f"{idle99 * 1000:.0f} ms | {ratio:.2f}x | <= 2x: {verdict(ratio <= 2)} "
        f"({before} before, {load()} after)",
        flush=True,
    )
    record(
        f"key echo p99 while a 2 MB answer streams ({len(busy)} keys, p50 "
        f"{percentile(busy, 0.5) * 1000:.0f} ms)",
        f"{p99 * 1000:.0f} ms",
        f"idle app: {idle99 * 1000:.0f} ms (p50 {percentile(idle, 0.5) * 1000:.0f} ms)",
        ratio,
        2.0,
    )
    bench_echo_median(busy, idle, minimal)


def bench_echo_median(busy: list[float], idle: list[float], minimal: list[float]) -> None:
    """The echo medians, streaming and idle, beside a minimal Textual app's."""
    p50, idle50, minimal50 = (percentile(v, 0.5) for v in (busy, idle, minimal))
    worse = max(p50, idle50) / minimal50
    print(
        f"  key echo p50 while streaming 2 MB / idle: {p50 * 1000:.0f} / {idle50 * 1000:.0f} ms"
        f" | minimal Textual app: {minimal50 * 1000:.0f} ms | {worse:.2f}x | <= 2x: "
        f"{verdict(worse <= 2)} ({load()})",
        flush=True,
    )
    record(
        f"key echo p50 while a 2 MB answer streams / idle ({len(busy)} keys)",
        f"{p50 * 1000:.0f} / {idle50 * 1000:.0f} ms",
        f"minimal Textual app: {minimal50 * 1000:.0f} ms",
        worse,
        2.0,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="cpu,echo,long")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not Terminal.available():
        print("bench_live: tmux is not installed; skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp_dir:
        base = Path(tmp_dir)
        print(f"the app while it streams, and a long session ({load()}):")
        if "cpu" in only:
            bench_cpu(base, args.runs)
        if "echo" in only:
            bench_echo(base, args.runs)
        if "long" in only:
            bench_long(base, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
