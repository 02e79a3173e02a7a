"""Issue 41: `bastion attach ID` on "machine" B follows a session machine A drives,
through one PostgreSQL database and nothing else (two homes: B has no socket of A's).

A is `python -m runtime.testing.drive` (a driving process with no screen, approvals
asked) in home a; B is the real `bastion attach ID` in home b, typed at through a pipe.
B sees A's answer grow checkpoint by checkpoint; B's prompt is answered by A; B
interrupts A's stream; B answers A's approval; A is SIGKILLed mid-answer and B says so
in one line, takes the session over and finishes it, nothing committed lost and the
tool call A made not made again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import uuid

import pytest

from runtime.testing.waiting import wait_for
from tests.e2e.test_attach import Proc
from tests.e2e.test_two_machines import machine, query

pytestmark = pytest.mark.e2e

TEXT = "".join(f"{i:04d} " for i in range(150))
LONG = "this answer goes on and on " * 40
WRITE = {
    "id": "call_1",
    "name": "write_file",
    "arguments": {"path": "note.txt", "content": "from machine B's y"},
}


@pytest.fixture
def procs():
    started: list[Proc] = []
    yield started
    for proc in reversed(started):
        proc.stop()


def drive_a(a, procs, sid: str, prompt: str) -> Proc:
    proc = Proc(
        [sys.executable, "-m", "runtime.testing.drive", "--session-id", sid, "--cwd",
         str(a.cwd), "--model", "openai/test-model", "--approval-mode", "ask",
         "--prompt", prompt],
        a.env, a.cwd,
    )  # fmt: skip
    procs.append(proc)
    proc.wait_for("serving ")
    return proc


def attach_b(b, procs, sid: str) -> Proc:
    proc = Proc(b.cmd("attach", sid), b.env, b.cwd)
    procs.append(proc)
    return proc


def test_b_follows_acts_on_and_takes_over_the_session_a_drives(loopback, tmp_path, pg_url, procs):
    server = loopback(
        [
            {"match": "count", "text": TEXT, "chunk_size": 5, "delay_ms": 15},
            {"match": "from-b", "text": "ANSWER-TO-B"},
            {"match": "long-one", "text": LONG, "chunk_size": 2, "delay_ms": 15},
            {"match": "please-write", "tool_calls": [WRITE]},
            {"match": "please-write", "text": "WROTE-IT"},
            {"match": "long-two", "text": LONG, "chunk_size": 2, "delay_ms": 15},
            {"text": "FINISHED-ON-B"},
        ]
    )
    a, b = (machine(tmp_path, name, pg_url, server.base_url) for name in ("a", "b"))
    sid = str(uuid.uuid4())
    a_proc = drive_a(a, procs, sid, "count")
    b_proc = attach_b(b, procs, sid)
    b_proc.wait_for(f"following it through the store: pid {a_proc.proc.pid} on", "err")

    # A's answer appears on B as A commits it, in more than one piece.
    b_proc.wait_for(TEXT)
    start = b_proc.text().index(TEXT[:10])
    with b_proc._lock:
        reads = list(b_proc.out)
    seen = pieces = 0
    for _, chunk in reads:
        seen += len(chunk)
        pieces += start < seen <= start + len(TEXT)
    assert pieces >= 2, pieces

    # B's prompt goes through the store; A answers it.
    b_proc.type("from-b")
    b_proc.wait_for("ANSWER-TO-B")

    # B interrupts A's stream.
    b_proc.type("long-one")
    b_proc.wait_for(LONG[:30])
    b_proc.type("/interrupt")
    b_proc.wait_for("[run interrupted]")
    assert LONG not in b_proc.text()

    # A asks for approval; B's answer decides it, A writes.
    b_proc.type("please-write")
    b_proc.wait_for("allow write_file")
    b_proc.type("y")
    b_proc.wait_for("WROTE-IT")
    assert (a.cwd / "note.txt").read_text() == "from machine B's y"

    # A dies mid-answer: B says so in one line and drives the session on.
    b_proc.type("/queue long-two")  # (its own run, whether or not B saw the last one end)
    wait_for(
        lambda: LONG[:80] in b_proc.text().partition("> long-two")[2], "A's second long answer"
    )
    a_proc.stop(signal.SIGKILL)
    states = query(pg_url, "SELECT state FROM runs WHERE conversation_id = %s", sid)
    assert ("running",) in states, (states, b_proc.text()[-300:])  # (killed mid-answer)
    b_proc.wait_for(f"the process driving {sid} (pid {a_proc.proc.pid} on", "err")
    b_proc.wait_for("this terminal drives it now", "err")
    b_proc.wait_for("FINISHED-ON-B")
    wait_for(
        lambda: (
            ("running",)
            not in query(pg_url, "SELECT state FROM runs WHERE conversation_id = %s", sid)
        ),
        "B to finish the run",
    )
    [(lease_pid,)] = query(pg_url, "SELECT lease_pid FROM conversations WHERE id = %s", sid)
    assert lease_pid == b_proc.proc.pid
    b_proc.type("/quit")
    assert b_proc.proc.wait(20) == 0

    entries = json.loads(b.run("export", sid).stdout)["entries"]
    answers = [(e["status"], e["text"]) for e in entries if e["kind"] == "assistant"]
    assert answers[0] == ("complete", TEXT)
    assert ("complete", "ANSWER-TO-B") in answers
    assert answers[-1] == ("complete", "FINISHED-ON-B")
    partial = [t for s, t in answers if s == "interrupted"]
    assert len(partial) == 2 and all(LONG.startswith(t) and t for t in partial)
    calls = query(pg_url, "SELECT name, state FROM tool_calls WHERE conversation_id = %s", sid)
    assert calls == [("write_file", "done")]  # made once, by A; not again by B
    assert "postgresql://" not in b_proc.text("err")  # (the store's URL is never printed)


def test_b_never_takes_the_lease_of_a_live_a(loopback, tmp_path, pg_url, procs):
    """While A lives, B follows however long it watches: the lease stays A's."""
    server = loopback([{"text": TEXT, "chunk_size": 5, "delay_ms": 10}])
    a, b = (machine(tmp_path, name, pg_url, server.base_url) for name in ("a", "b"))
    sid = str(uuid.uuid4())
    a_proc = drive_a(a, procs, sid, "count")
    [(token, _)] = query(
        pg_url, "SELECT lease_token, lease_pid FROM conversations WHERE id = %s", sid
    )
    b_proc = attach_b(b, procs, sid)
    b_proc.wait_for(TEXT)
    wait_for(
        lambda: (
            query(pg_url, "SELECT state FROM runs WHERE conversation_id = %s", sid)
            == [("completed",)]
        ),
        "A's run to end",
    )
    b_proc.type("/quit")
    assert b_proc.proc.wait(20) == 0
    assert query(pg_url, "SELECT lease_token, lease_pid FROM conversations WHERE id = %s", sid) == [
        (token, a_proc.proc.pid)
    ]


def test_a_follower_whose_store_drops_says_so_in_one_line_without_the_password(
    loopback, tmp_path, pg_url, procs
):
    """B's store URL carries a password; the server drops every connection while B
    follows: B says so in one line naming the store with the password masked, and
    ends; what was committed stays in the database."""
    server = loopback([{"text": TEXT, "chunk_size": 5, "delay_ms": 15}])
    secret = pg_url.replace("postgresql://bastion@", "postgresql://bastion:pw-s3cret@")
    a = machine(tmp_path, "a", pg_url, server.base_url)
    b = machine(tmp_path, "b", secret, server.base_url)
    sid = str(uuid.uuid4())
    drive_a(a, procs, sid, "count")
    b_proc = attach_b(b, procs, sid)
    b_proc.wait_for(TEXT[:40])
    query(
        pg_url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    assert b_proc.proc.wait(30) != 0
    err = b_proc.text("err")
    assert "postgresql://bastion:***@" in err and "pw-s3cret" not in err + b_proc.text(), err
    kept = query(pg_url, "SELECT COUNT(*) FROM entries WHERE conversation_id = %s", sid)
    assert kept[0][0] >= 2  # (the prompt and A's answer so far)


def test_on_sqlite_attach_follows_a_live_driver_whose_socket_it_cannot_reach(
    loopback, bastion, procs
):
    """One SQLite home; A's attach socket is gone (removed, as by a cleaner of /tmp)
    while A lives: attach follows A through the store file instead of failing. The
    answer's NUL and escape sequence reach B's screen shown, not obeyed."""
    hostile = "before \x00 and \x1b[2J\x1b]0;owned\x07 after"
    server = loopback([{"text": TEXT, "chunk_size": 5, "delay_ms": 10}, {"text": hostile}])
    bs = bastion(server)
    sid = str(uuid.uuid4())
    a_proc = drive_a(bs, procs, sid, "count")
    sock = a_proc.text().split("serving ", 1)[1].strip()
    os.unlink(sock)
    b_proc = attach_b(bs, procs, sid)
    b_proc.wait_for(f"following it through the store: pid {a_proc.proc.pid} on", "err")
    b_proc.wait_for(TEXT)
    b_proc.type("say it")
    b_proc.wait_for(" after")
    shown = b_proc.text()
    assert (
        "before " in shown and "\x1b" not in shown and "\x00" not in shown and "\x07" not in shown
    )
    b_proc.type("/quit")
    assert b_proc.proc.wait(20) == 0
    assert a_proc.proc.poll() is None  # A drives on


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_attached_app_follows_refuses_compact_in_one_line_and_takes_over(
    loopback, tmp_path, pg_url, procs
):
    """`bastion attach ID` on a terminal (the app, in tmux) on machine B: it says it
    follows A through the store, shows A's answer, sends a prompt A answers, refuses
    /compact in one line naming A, and says so when A dies and it drives the session."""
    from tests.tui.test_tmux import Tmux, wait_exit

    server = loopback(
        [
            {"match": "count", "text": TEXT, "chunk_size": 5, "delay_ms": 5},
            {"match": "from-b", "text": "ANSWER-TO-B"},
            {"match": "after-a", "text": "ANSWERED-ON-B"},
        ]
    )
    a, b = (machine(tmp_path, name, pg_url, server.base_url) for name in ("a", "b"))
    sid = str(uuid.uuid4())
    a_proc = drive_a(a, procs, sid, "count")
    tmux = Tmux(tmp_path)
    try:
        env = b.env | {"TERM": "xterm-256color", "COLORTERM": "truecolor"}
        exit_file = tmux.start([*b.cmd("attach", sid)], env, b.cwd)
        tmux.wait_for(lambda s: "following through the store" in s, "the follower's notice")
        tmux.wait_for(lambda s: "0149" in s, "A's answer")
        tmux.send("/compact", literal=True)  # (a whole command name: Enter runs it)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "acts in the process" in s, "the refusal naming A")
        tmux.send("from-b", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "ANSWER-TO-B" in s, "A's answer to B")
        a_proc.stop(signal.SIGKILL)
        tmux.wait_for(lambda s: "drives it now" in s, "the takeover notice")
        tmux.send("after-a", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "ANSWERED-ON-B" in s, "B's own answer")
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
    finally:
        tmux.kill()
