"""Issue 25, item 4: eight processes started at once with one `--request-key`.

One admission and one model request, and now also one session: the seven that lose
the race used to leave a conversation each, empty, and print its id beside the
shared run's id (so `--resume` of it did nothing). Each must report the one session
and run the key admitted, and say nothing on stderr but what a run says.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.e2e

RACERS = 8


def stored_ids(home, url: str | None) -> tuple[list[str], list[str]]:
    """The ids of every conversation and run in the store (the file, or PostgreSQL)."""
    if url is not None:
        import psycopg

        with psycopg.connect(url) as db:
            sessions = [row[0] for row in db.execute("SELECT id FROM conversations")]
            return sessions, [row[0] for row in db.execute("SELECT id FROM runs")]
    with sqlite3.connect(home / "bastion.sqlite") as db:
        sessions = [row[0] for row in db.execute("SELECT id FROM conversations")]
        return sessions, [row[0] for row in db.execute("SELECT id FROM runs")]


def test_parallel_request_key_one_session_one_run_every_process_reports_it(
    loopback, bastion, team_store
):
    # One turn only: a second model request would be answered "script exhausted".
    server = loopback([{"text": "the one answer", "chunk_size": 4, "delay_ms": 5}])
    b = bastion(server)
    if team_store is not None:
        b.env["BASTION_STORE"] = team_store
    args = ("-p", "do it once", "--request-key", "race-1", "--output-format", "json")
    racers = [b.popen(*args) for _ in range(RACERS)]
    results = []
    for proc in racers:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, (stdout, stderr)
        assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert len(server.requests()) == 1
    sessions, runs = stored_ids(b.home, team_store)
    assert len(sessions) == 1 and len(runs) == 1  # no empty conversation left behind
    assert {(r["session_id"], r["run_id"]) for r in results} == {(sessions[0], runs[0])}
    assert {r["result"] for r in results} == {"the one answer"}
