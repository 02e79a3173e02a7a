"""Issue 41: a session moves between "machines" through one PostgreSQL database.

Two homes (BASTION_HOME and config dir each, the config naming the same store) run
the real `bastion -p` in separate processes. A streams and is SIGKILLed; B resumes
the session with `-r` and finishes it, the partial kept. And A, SIGSTOPped mid-answer
(a laptop lid closed) while B takes the session over, cannot write once SIGCONT wakes
it: its fencing token is refused, so nothing it streams after the takeover is kept.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import psycopg
import pytest

from runtime.store.pg import schema
from runtime.testing.waiting import wait_for
from tests.e2e.conftest import Bastion

pytestmark = pytest.mark.e2e

TEXT = "".join(f"{i:04d} " for i in range(400))
B_TEXT = "".join(f"b{i:03d} " for i in range(300))


def machine(tmp_path: Path, name: str, pg_url: str, base_url: str) -> Bastion:
    """One machine: its own data home and config dir, its config naming the team store
    (its schema made by the first bastion that opens it, here before the test polls it)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema.prepare(conn, "the team store")
    config = tmp_path / name / "config" / "bastion"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(f'store = "{pg_url}"\n')
    cwd = tmp_path / "work"  # (the repository checked out at the same path on both)
    cwd.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "BASTION_", "OLLAMA_"))
    }
    env.update(
        BASTION_HOME=str(tmp_path / name / "data"),
        XDG_CONFIG_HOME=str(tmp_path / name / "config"),
        BASTION_MODEL="openai/test-model",
        OPENAI_BASE_URL=base_url,
        PYTHONUNBUFFERED="1",
    )
    return Bastion(tmp_path / name / "data", cwd, env)


def query(url: str, sql: str, *params: object) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def streamed(url: str, sid: str) -> int:
    """Characters of the session's answer committed so far (checkpointed chunks)."""
    [(count,)] = query(
        url, "SELECT COALESCE(SUM(LENGTH(text)), 0) FROM chunks WHERE conversation_id = %s", sid
    )
    return int(count)


def lease(url: str, sid: str) -> tuple:
    [row] = query(url, "SELECT lease_token, lease_pid FROM conversations WHERE id = %s", sid)
    return row


def finish(proc) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_b_resumes_the_session_a_was_streaming_when_it_was_killed(loopback, tmp_path, pg_url):
    server = loopback([{"text": TEXT, "chunk_size": 5, "delay_ms": 20}, {"text": "THE REST."}])
    a = machine(tmp_path, "a", pg_url, server.base_url)
    b = machine(tmp_path, "b", pg_url, server.base_url)
    sid = str(uuid.uuid4())
    proc = a.popen("-p", "--session-id", sid, "count")
    wait_for(lambda: streamed(pg_url, sid) > 20, "part of A's answer committed")
    proc.kill()
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()

    resumed = b.run("-p", "-r", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "THE REST."
    entries = json.loads(b.run("export", sid).stdout)["entries"]
    answers = [(e["status"], e["text"]) for e in entries if e["kind"] == "assistant"]
    (status, partial), rest = answers
    assert status == "interrupted" and len(partial) > 20 and TEXT.startswith(partial)
    assert rest == ("complete", "THE REST.")
    listed = b.run("sessions", "--all", "--json")  # (from the team store, not a local file)
    assert listed.returncode == 0 and sid in listed.stdout, listed.stderr
    found = a.run("sessions", "search", "REST")
    assert found.returncode == 0 and sid[:8] in found.stdout, found.stderr
    assert not (tmp_path / "a" / "data" / "bastion.sqlite").exists()  # (all in PostgreSQL)
    assert not (tmp_path / "b" / "data" / "bastion.sqlite").exists()


def test_a_stalled_owner_woken_after_b_took_over_cannot_write(loopback, tmp_path, pg_url):
    server = loopback(
        [
            {"text": TEXT, "chunk_size": 5, "delay_ms": 20},
            {"text": B_TEXT, "chunk_size": 5, "delay_ms": 10},
        ]
    )
    a = machine(tmp_path, "a", pg_url, server.base_url)
    b = machine(tmp_path, "b", pg_url, server.base_url)
    sid = str(uuid.uuid4())
    stalled = a.popen("-p", "--session-id", sid, "count")
    wait_for(lambda: streamed(pg_url, sid) > 20, "part of A's answer committed")
    stalled.send_signal(signal.SIGSTOP)
    a_token, a_pid = lease(pg_url, sid)
    assert a_pid == stalled.pid
    [(a_entry,)] = query(
        pg_url, "SELECT id FROM entries WHERE conversation_id = %s AND status = 'streaming'", sid
    )
    # A stopped process is alive, so its lease is taken over once its heartbeat is older
    # than the lease (15 s): that time is made to have passed, rather than waited for.
    query(
        pg_url,
        "UPDATE conversations SET lease_heartbeat = lease_heartbeat - 60 WHERE id = %s",
        sid,
    )
    taker = b.popen("-p", "-r", sid)
    try:
        wait_for(lambda: lease(pg_url, sid)[0] > a_token, "B to take the lease over")
        wait_for(lambda: b_streamed(pg_url, sid, a_entry) > 0, "B's answer to start committing")
        kept = query(
            pg_url,
            "SELECT id, text FROM entries WHERE conversation_id = %s AND status = 'interrupted'",
            sid,
        )
        assert len(kept) == 1 and TEXT.startswith(kept[0][1]) and len(kept[0][1]) > 20
    finally:
        stalled.send_signal(signal.SIGCONT)
    code, _, err = finish(stalled)  # A wakes, its stream goes on, its next write is refused
    assert code != 0
    assert "taken over by another process" in err, err

    code, out, err = finish(taker)
    assert code == 0, err
    assert out.strip() == B_TEXT.strip()
    # Nothing A streamed after the takeover was kept: its interrupted partial is as B found
    # it, its entry's chunks were sealed, and B's answer follows it whole.
    entries = query(
        pg_url,
        "SELECT kind, status, text FROM entries WHERE conversation_id = %s ORDER BY position",
        sid,
    )
    answers = [(status, text) for kind, status, text in entries if kind == "assistant"]
    assert answers == [("interrupted", kept[0][1]), ("complete", B_TEXT)]


def b_streamed(url: str, sid: str, a_entry: str) -> int:
    """Characters of B's answer committed so far: chunks of a streaming entry that is not
    A's (B closes A's as interrupted, then starts its own)."""
    [(count,)] = query(
        url,
        "SELECT COALESCE(SUM(LENGTH(c.text)), 0) FROM chunks c JOIN entries e ON e.id = c.owner_id "
        "WHERE e.conversation_id = %s AND e.status = 'streaming' AND e.id != %s",
        sid,
        a_entry,
    )
    return int(count)
