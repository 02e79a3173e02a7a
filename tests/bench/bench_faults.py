"""Bench: runs in parallel and request-key races end cleanly (issue 25, items 3 and 4).

    python tests/bench/bench_faults.py [--runs 50] [--races 20] [--racers 8] [--kills 100]

1. parallel: `--runs` `bastion -p` runs started at once, each its own session,
   against one loopback server: every one must exit 0 with its answer.
2. races: `--races` times, `--racers` `bastion -p --request-key K` with one key and
   one prompt started at once: one session, one run and one model request per key,
   and every process reports that session and run.
3. kills: `--kills` times, `bastion -p --output-format stream-json` killed (SIGKILL)
   at a random moment while it streams; what it showed (its text deltas) against
   what the store kept. The bound: at most what was shown in the last checkpoint
   interval (100 ms) before the kill. Prints the worst loss and how many kills kept
   within the bound; fails on a loss past twice the bound (a loaded machine may
   delay one checkpoint) or on kept text that is not what was shown.

Any traceback or "Future exception was never retrieved" on any process's stderr
fails the bench, as does any run that does not end as described. Prints one line
per row and exits 1 on a failure. Run by `nox -s crash`. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from runtime.testing.process import LoopbackProcess, kill_mid_stream  # noqa: E402

BASTION = str(Path(sys.executable).parent / "bastion")
STRAY = ("Traceback", "never retrieved")


def environment(home: Path, server: LoopbackProcess) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASTION_"))}
    env.update(
        BASTION_HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        OPENAI_BASE_URL=server.base_url,
        BASTION_MODEL="openai/bench",
    )
    return env


def start(env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [BASTION, "-p", "--output-format", "json", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(procs: list[subprocess.Popen[str]], problems: list[str]) -> list[dict[str, object]]:
    """Each process's result object; what went wrong is added to `problems`."""
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        stray = [s for s in STRAY if s in stderr]
        if proc.returncode != 0 or stray:
            problems.append(f"exit {proc.returncode}, {stray or 'no traceback'}: {stderr[-400:]}")
        try:
            results.append(json.loads(stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError):
            problems.append(f"no result object (exit {proc.returncode}): {stderr[-200:]}")
    return results


def parallel(runs: int, base: Path) -> list[str]:
    problems: list[str] = []
    turn = {"text": "a parallel answer", "chunk_size": 4, "repeat": True}
    with LoopbackProcess.start([turn], base / "server") as server:
        env = environment(base / "home", server)
        (base / "work").mkdir()
        procs = [start(env, base / "work", f"parallel run {i}") for i in range(runs)]
        results = finish(procs, problems)
    wrong = [r for r in results if r.get("result") != "a parallel answer"]
    problems += [f"run {r.get('run_id')} ended {r.get('status')}" for r in wrong]
    return problems


def race(index: int, racers: int, base: Path) -> list[str]:
    problems: list[str] = []
    home = base / f"race{index}"
    with LoopbackProcess.start([{"text": "the one answer"}], home / "server") as server:
        env = environment(home, server)
        (home / "work").mkdir(parents=True)
        procs = [
            start(env, home / "work", "--request-key", f"race-{index}", "do it once")
            for _ in range(racers)
        ]
        results = finish(procs, problems)
        requests = len(server.requests())
    with sqlite3.connect(home / "bastion.sqlite") as db:
        sessions = [row[0] for row in db.execute("SELECT id FROM conversations")]
        runs = [row[0] for row in db.execute("SELECT id FROM runs")]
    reported = {(r.get("session_id"), r.get("run_id")) for r in results}
    if len(sessions) != 1 or len(runs) != 1 or requests != 1:
        problems.append(f"{len(sessions)} sessions, {len(runs)} runs, {requests} requests")
    elif reported != {(sessions[0], runs[0])}:
        problems.append(f"processes reported {sorted(map(str, reported))}")
    return problems


INTERVAL = 0.1  # LoopSettings.checkpoint_interval
TEXT = "".join(f"{i:05d} " for i in range(2000))


def kill_once(env: dict[str, str], cwd: Path, rng: random.Random) -> tuple[int, int, int, int]:
    """(shown, kept, shown in the last interval, in the last two) for one kill."""
    sid = str(uuid.uuid4())
    proc = subprocess.Popen(
        [BASTION, "-p", "--output-format", "stream-json", "--session-id", sid, "go"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deltas, killed_at = kill_mid_stream(proc, rng)
    shown = "".join(text for _, text in deltas)

    def within(seconds: float) -> int:
        return sum(len(text) for at, text in deltas if at > killed_at - seconds)

    out = subprocess.run([BASTION, "export", sid], cwd=cwd, env=env, capture_output=True)
    entries = json.loads(out.stdout)["entries"] if out.returncode == 0 else []
    kept = next((e["text"] for e in entries if e["kind"] == "assistant"), "")
    if not (TEXT.startswith(shown) and shown.startswith(kept)):
        raise AssertionError(f"kept text is not what was shown: {kept[-30:]!r} {shown[-30:]!r}")
    return len(shown), len(kept), within(INTERVAL), within(2 * INTERVAL)


def kills(count: int, base: Path) -> list[str]:
    problems: list[str] = []
    turn = {"text": TEXT, "chunk_size": 4, "delay_ms": 10, "repeat": True}
    rng = random.Random(25)
    worst, inside = 0, 0
    with LoopbackProcess.start([turn], base / "server") as server:
        env = environment(base / "home", server)
        (base / "work").mkdir()
        for index in range(count):
            shown, kept, bound, twice = kill_once(env, base / "work", rng)
            lost = shown - kept
            worst = max(worst, lost)
            inside += lost <= bound
            if lost > twice:
                problems.append(f"kill {index}: lost {lost} characters, bound {bound}")
    print(
        f"kills: {count}, worst loss {worst} characters; {inside} of {count} within the "
        f"text shown in the last {INTERVAL * 1000:.0f} ms before the kill"
    )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--races", type=int, default=20)
    parser.add_argument("--racers", type=int, default=8)
    parser.add_argument("--kills", type=int, default=100)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="bastion-faults-") as tmp:
        base = Path(tmp)
        started = time.monotonic()
        problems = parallel(args.runs, base / "parallel")
        took = time.monotonic() - started
        print(f"parallel: {args.runs} runs at once, {len(problems)} problems ({took:.1f} s)")
        for problem in problems[:10]:
            print(f"  {problem}")
        failed = failed or bool(problems)
        started, problems = time.monotonic(), []
        for index in range(args.races):
            problems += [f"race {index}: {p}" for p in race(index, args.racers, base / "races")]
        took = time.monotonic() - started
        print(
            f"races: {args.races} x {args.racers} processes with one request key, "
            f"{len(problems)} problems ({took:.1f} s)"
        )
        for problem in problems[:10]:
            print(f"  {problem}")
        failed = failed or bool(problems)
        problems = kills(args.kills, base / "kills")
        for problem in problems[:10]:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
