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


def test_processes_racing_to_create_one_session_id_leave_one_session_and_fail_one_line(
    loopback, bastion, team_store
):
    """Four processes started at once with one new `--session-id`: one creates it and
    runs its prompt; each other one either continues it after the first (its prompt
    answered in turn) or says in one line that another process drives it. No store
    fails, no stray session, no prompt run twice."""
    server = loopback(
        [{"text": f"answer {i}", "chunk_size": 4, "delay_ms": 5} for i in range(RACERS)]
    )
    b = bastion(server)
    if team_store is not None:
        b.env["BASTION_STORE"] = team_store
    session = "0193b6a4-0000-7000-8000-00000000abcd"
    racers = [
        b.popen("-p", f"prompt {i}", "--session-id", session, "--output-format", "json")
        for i in range(4)
    ]
    ran, busy = 0, 0
    for proc in racers:
        stdout, stderr = proc.communicate(timeout=120)
        assert "Traceback" not in stderr and "the session stopped" not in stderr, stderr
        if proc.returncode == 0:
            ran += 1
            assert json.loads(stdout.strip().splitlines()[-1])["session_id"] == session
        elif stdout.strip():  # found it created while opening it: its result says so
            busy += 1
            result = json.loads(stdout.strip().splitlines()[-1])
            assert result["status"] == "failed" and result["run_id"] is None, result
            assert "drive" in result["error"]["message"], result
        else:  # found it driven when it opened it: one line on stderr
            busy += 1
            assert len(stderr.strip().splitlines()) == 1 and "driv" in stderr, stderr
    sessions, runs = stored_ids(b.home, team_store)
    assert sessions == [session] and ran >= 1 and ran + busy == 4
    assert len(runs) == ran == len(server.requests())
