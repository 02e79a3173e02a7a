"""Benchmark: N agents in separate processes streaming into one store at once.

    python tests/bench/bench_team_store.py [--agents 20] [--checkpoints 100]
                                      [--interval 0.1] [--chars 40] [--url URL]

Each agent is its own process: it opens the store, creates a session with a
streaming answer, takes the lease, and commits `checkpoints` checkpoints of
`chars` characters, one every `interval` seconds (the harness's cadence is 0.1 s;
0 measures what the store can take), each one transaction with the fencing token,
as the model loop's are. Reported per store: checkpoints per second (all agents,
from the first start to the last end), p50/p99 checkpoint latency, and the bytes
the store grew by per character streamed.

SQLite is a file in a temporary folder (WAL, synchronous=NORMAL, as bastion opens
it); PostgreSQL is `--url`, or a server this script starts itself on a Unix socket
with its defaults (fsync on, synchronous_commit on: every commit flushed), from
Debian's postgresql package (tests/pgserver.py). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


async def agent(location: str, checkpoints: int, interval: float, chars: int) -> dict:
    from runtime.harness import new_conversation
    from runtime.model.ids import uuid7
    from runtime.model.records import Entry, EntryKind, EntryStatus
    from runtime.store.database import Store

    store = await Store.open(location)
    try:
        conv = new_conversation("/bench")
        entry = Entry(
            uuid7(), conv.id, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", time.time()
        )
        await store.create_conversation(conv, lambda tx: tx.add_entry(entry))
        lease, _ = await store.try_acquire_lease(
            conv.id, uuid7(), os.getpid(), "bench", lambda _: True
        )
        text = ("word " * chars)[:chars]
        latencies, offset = [], 0
        start = time.monotonic()
        for _ in range(checkpoints):
            began = time.perf_counter()
            offset = await store.transact(
                conv.id,
                lambda tx, at=offset: tx.append_chunk(entry.id, "text", at, text),
                token=lease.token,
            )
            latencies.append(time.perf_counter() - began)
            if interval:
                await asyncio.sleep(interval)  # (the cadence being measured)
        return {"start": start, "end": time.monotonic(), "latencies": latencies}
    finally:
        await store.close()


def size(location: str) -> int:
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])
    return sum(p.stat().st_size for p in Path(location).parent.glob("bastion.sqlite*"))


def run(location: str, args: argparse.Namespace) -> dict:
    import asyncio as aio

    from runtime.store.database import Store

    async def prepare() -> None:
        await (await Store.open(location)).close()

    aio.run(prepare())
    before = size(location)
    argv = [sys.executable, __file__, "--agent", location, "--checkpoints", str(args.checkpoints),
            "--interval", str(args.interval), "--chars", str(args.chars)]  # fmt: skip
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(args.agents)]
    results = [json.loads(p.communicate()[0]) for p in procs]
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    latencies = sorted(x for r in results for x in r["latencies"])
    count = len(latencies)
    return {
        "checkpoints/s": count / wall,
        "p50 ms": 1000 * statistics.median(latencies),
        "p99 ms": 1000 * latencies[min(count - 1, int(count * 0.99))],
        "bytes/char": (size(location) - before) / (count * args.chars),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--chars", type=int, default=40)
    parser.add_argument("--url")
    parser.add_argument("--agent")
    args = parser.parse_args()
    if args.agent:
        out = asyncio.run(agent(args.agent, args.checkpoints, args.interval, args.chars))
        print(json.dumps(out))
        return
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        rows["SQLite"] = run(str(Path(folder) / "bastion.sqlite"), args)
    server = None
    url = args.url
    if url is None:
        from tests.pgserver import start_server

        server = start_server(fsync=True)  # (durable commits, as a team's server)
        if isinstance(server, str):
            print(f"PostgreSQL: {server}")
            server = None
        else:
            url = server.database()
    try:
        if url is not None:
            rows["PostgreSQL"] = run(url, args)
    finally:
        if server is not None:
            server.stop()
    print(
        f"{args.agents} agents x {args.checkpoints} checkpoints of {args.chars} characters, "
        f"one every {args.interval} s"
    )
    print(f"{'store':<11} {'checkpoints/s':>14} {'p50 ms':>8} {'p99 ms':>8} {'bytes/char':>11}")
    for name, row in rows.items():
        print(
            f"{name:<11} {row['checkpoints/s']:>14.0f} {row['p50 ms']:>8.1f} "
            f"{row['p99 ms']:>8.1f} {row['bytes/char']:>11.1f}"
        )


if __name__ == "__main__":
    main()
