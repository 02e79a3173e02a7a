"""Benchmark: following a session through the store, polling against LISTEN/NOTIFY.

    python tests/bench/bench_follow.py [--followers 5] [--checkpoints 100]
                                       [--interval 0.1] [--poll 0.1] [--url URL]

One writer process streams like a driver (a checkpoint of 40 characters every
`interval` seconds, each one fenced transaction); `followers` processes follow it:

- `poll`: `Harness.follow` as `bastion attach` runs it (runtime.harness.following):
  the conversation's version every `poll` seconds, the ledger after the last version
  seen when it moved, the lease once a second;
- `notify`: each follower LISTENs on a channel the writer NOTIFYs inside each
  checkpoint's transaction (what LISTEN/NOTIFY would take: a change to every driver's
  commits), and reads the ledger when notified.

Reported for each: latency from the writer's commit to the follower holding the
event (p50, p99; one clock, CLOCK_MONOTONIC, across processes), what the followers
add to the server (transactions a second, and CPU of the server's processes, both
per follower, over the writer alone), and the writer's own p50/p99 checkpoint.
PostgreSQL is `--url`, or a server this script starts (fsync on). Not collected by
pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CHANNEL = "bench_follow"


async def prepare(url: str) -> tuple[str, str]:
    """A conversation with a streaming answer, its lease held by "another host"."""
    from runtime.harness import new_conversation
    from runtime.model.ids import uuid7
    from runtime.model.records import Entry, EntryKind, EntryStatus
    from runtime.store.database import Store

    store = await Store.open(url)
    try:
        conv = new_conversation("/bench")
        entry = Entry(
            uuid7(), conv.id, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", time.time()
        )
        await store.create_conversation(conv, lambda tx: tx.add_entry(entry))
        await store.try_acquire_lease(conv.id, uuid7(), 1, "bench-host", lambda _: True)
        return conv.id, entry.id
    finally:
        await store.close()


async def writer(url: str, cid: str, entry_id: str, args: argparse.Namespace) -> None:
    from runtime.store.database import Store

    store = await Store.open(url)
    token = (await store.lease(cid)).token
    text = ("word " * 8)[:40]
    commits, latencies, offset = [], [], 0
    try:
        for n in range(args.checkpoints):
            began = time.perf_counter()
            if n % 30 == 0:  # (the lease kept live: the followers read it every second)
                await store.heartbeat(cid, token)

            def body(tx, at=offset):  # type: ignore[no-untyped-def]
                done = tx.append_chunk(entry_id, "text", at, text)
                if args.mode == "notify":
                    tx.rows("SELECT pg_notify(?, ?)", (CHANNEL, str(at)))
                return done

            offset = await store.transact(cid, body, token=token)
            commits.append(time.monotonic())
            latencies.append(time.perf_counter() - began)
            await asyncio.sleep(max(0.0, args.interval - (time.perf_counter() - began)))
    finally:
        await store.close()
    print(json.dumps({"commits": commits, "latencies": latencies}))


async def poll_follower(url: str, cid: str, args: argparse.Namespace) -> None:
    from runtime import Harness
    from runtime.harness import following
    from runtime.model.events import EntryTextAppended

    following.FOLLOW_POLL = args.poll
    harness = await Harness.open(url)
    got: list[float] = []
    try:
        sub = harness.subscribe(cid)
        assert await harness.follow(cid) is not None
        print("ready", flush=True)
        async for event in sub:
            if isinstance(event, EntryTextAppended):
                got.append(time.monotonic())
                if len(got) == args.checkpoints:
                    break
    finally:
        await harness.close()
    print(json.dumps({"got": got}))


async def notify_follower(url: str, cid: str, args: argparse.Namespace) -> None:
    import psycopg

    from runtime.model.events import EntryTextAppended
    from runtime.store.database import Store

    store = await Store.open(url)
    listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
    got: list[float] = []
    seen = await store.version(cid)
    try:
        await listener.execute(f"LISTEN {CHANNEL}")
        print("ready", flush=True)
        async for _ in listener.notifies():
            for event in await store.ledger(cid, seen):
                seen = event.version
                if isinstance(event, EntryTextAppended):
                    got.append(time.monotonic())
            if len(got) >= args.checkpoints:
                break
    finally:
        await listener.close()
        await store.close()
    print(json.dumps({"got": got[: args.checkpoints]}))


def server_load(url: str) -> tuple[int, float]:
    """(transactions the server has committed, CPU seconds its processes have used)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        [(xacts,)] = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchall()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "(postgres)" in stat:
            fields = stat.rsplit(")", 1)[1].split()
            # its own CPU, and its children's that ended (the postmaster reaps backends)
            cpu += sum(int(f) for f in fields[11:15]) / ticks
    return int(xacts), cpu


def role(argv: list[str], url: str, cid: str, mode: str, **extra: object) -> list[str]:
    flags = [f"--{k}={v}" for k, v in extra.items()]
    return [
        sys.executable,
        __file__,
        *argv,
        *flags,
        f"--url={url}",
        f"--cid={cid}",
        f"--mode={mode}",
    ]


def scenario(url: str, mode: str, followers: int, args: argparse.Namespace) -> dict:
    cid, entry_id = asyncio.run(prepare(url))
    base = [
        f"--checkpoints={args.checkpoints}",
        f"--interval={args.interval}",
        f"--poll={args.poll}",
    ]
    procs = [
        subprocess.Popen(role([*base, "--role=follower"], url, cid, mode),
                         stdout=subprocess.PIPE, text=True)
        for _ in range(followers)
    ]  # fmt: skip
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    before, started = server_load(url), time.monotonic()
    out = subprocess.run(
        role([*base, "--role=writer"], url, cid, mode, entry=entry_id),
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    written = json.loads(out)
    after, took = server_load(url), time.monotonic() - started
    lags = []
    for proc in procs:
        got = json.loads(proc.communicate(timeout=60)[0].splitlines()[-1])["got"]
        lags += [g - c for g, c in zip(got, written["commits"], strict=False)]
    lat = sorted(written["latencies"])
    return {
        "mode": mode,
        "followers": followers,
        "lag_p50_ms": statistics.median(lags) * 1000 if lags else None,
        "lag_p99_ms": lags and sorted(lags)[int(len(lags) * 0.99) - 1] * 1000,
        "xacts_per_s": (after[0] - before[0]) / took,
        "server_cpu_ms_per_s": (after[1] - before[1]) / took * 1000,
        "writer_p50_ms": statistics.median(lat) * 1000,
        "writer_p99_ms": lat[int(len(lat) * 0.99) - 1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--followers", type=int, default=5)
    parser.add_argument("--checkpoints", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--poll", type=float, default=0.1)
    parser.add_argument("--url")
    parser.add_argument("--role")
    parser.add_argument("--cid")
    parser.add_argument("--mode", default="poll")
    parser.add_argument("--entry")
    args = parser.parse_args()
    if args.role == "writer":
        asyncio.run(writer(args.url, args.cid, args.entry, args))
        return
    if args.role == "follower":
        run = poll_follower if args.mode == "poll" else notify_follower
        asyncio.run(run(args.url, args.cid, args))
        return
    server = None
    url = args.url
    if url is None:
        from tests.pgserver import start_server

        started = start_server(fsync=True)
        if isinstance(started, str):
            sys.exit(started)
        server, url = started, started.database()
    try:
        rows = [scenario(url, "poll", 0, args)]
        for mode in ("poll", "notify"):
            rows.append(scenario(url, mode, args.followers, args))
        base = rows[0]
        for row in rows:
            n = max(row["followers"], 1)
            row["xacts_per_s_per_follower"] = (row["xacts_per_s"] - base["xacts_per_s"]) / n
            row["cpu_ms_per_s_per_follower"] = (
                row["server_cpu_ms_per_s"] - base["server_cpu_ms_per_s"]
            ) / n
            print(
                json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
