"""Crash mid-stream and resume; a second driver refused; bad input leaves the store as it was."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import threading

import pytest

from runtime.context.messages import CONTINUE
from runtime.testing.waiting import wait_for

pytestmark = pytest.mark.e2e

SLOW = "The slow answer streams one piece at a time. " * 40  # 1,800 chars
SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"


class Collected:
    """What a process writes to `stream`, read as it comes by a thread."""

    def __init__(self, stream) -> None:
        self.chunks: list[bytes] = []
        fd = stream.fileno()
        self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self.thread.start()

    def _read(self, fd: int) -> None:
        while chunk := os.read(fd, 65536):
            self.chunks.append(chunk)

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


def exported(b, sid=SID):
    out = b.run("export", sid)
    return json.loads(out.stdout) if out.returncode == 0 else None


def partial_text(b):
    data = exported(b)
    if not data:
        return None
    answers = [e for e in data["entries"] if e["kind"] == "assistant" and e["text"]]
    return answers[0]["text"] if answers else None


def test_sigkill_mid_stream_then_resume_finishes_the_run(loopback, bastion):
    server = loopback(
        [{"text": SLOW, "chunk_size": 6, "delay_ms": 25}, {"text": "The resumed, complete answer."}]
    )
    b = bastion(server)
    proc = b.popen("-p", "--session-id", SID, "write slowly")
    wait_for(lambda: partial_text(b))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)

    data = exported(b)
    user, answer = data["entries"]
    assert (user["kind"], user["status"], user["text"]) == ("user", "complete", "write slowly")
    assert answer["kind"] == "assistant" and answer["status"] != "complete"
    assert answer["text"] and SLOW.startswith(answer["text"]) and answer["text"] != SLOW
    assert data["runs"][0]["state"] == "running"

    out = b.run("-p", "--resume", SID)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "The resumed, complete answer.\n"
    data = exported(b)
    kinds = [(e["kind"], e["status"]) for e in data["entries"]]
    assert kinds == [("user", "complete"), ("assistant", "interrupted"), ("assistant", "complete")]
    assert data["entries"][1]["text"] == answer["text"]  # the partial is kept as it was
    assert [r["state"] for r in data["runs"]] == ["completed"]
    # The resumed request sends the kept partial cut off and asks the model to go on
    # from it (issue 25, item 5: asking again from the input showed the answer twice).
    sent = server.requests()[1]["messages"]
    assert sent[-3] == {"role": "user", "content": "write slowly"}
    assert sent[-2]["role"] == "assistant" and sent[-2]["content"].startswith(answer["text"])
    assert sent[-1] == {"role": "user", "content": CONTINUE}


def test_resume_with_nothing_unfinished_reports_the_last_answer(loopback, bastion):
    server = loopback([{"text": "done already"}])
    b = bastion(server)
    assert b.run("-p", "--session-id", SID, "q").returncode == 0
    out = b.run("-p", "--resume", SID, "--output-format", "json")
    assert out.returncode == 0 and json.loads(out.stdout)["result"] == "done already"


def test_second_process_driving_the_same_conversation_is_refused(loopback, bastion):
    # Streams for a minute: the second process comes while the first holds the lease,
    # however slowly a loaded machine starts it.
    server = loopback([{"text": SLOW, "chunk_size": 6, "delay_ms": 200}])
    b = bastion(server)
    proc = b.popen("-p", "--session-id", SID, "slow one")
    try:
        wait_for(lambda: partial_text(b))
        data_before = exported(b)
        out = b.run("-p", "--resume", SID, "me too")
        assert out.returncode == 2
        assert f"pid {proc.pid}" in out.stderr and len(out.stderr.strip().splitlines()) == 1
        after = exported(b)
        assert [e["text"] for e in after["entries"] if e["kind"] == "user"] == ["slow one"]
        assert len(after["runs"]) == len(data_before["runs"])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 130
    assert exported(b)["runs"][0]["state"] == "interrupted"


def db_digest(home):
    path = home / "bastion.sqlite"
    if not path.exists():
        return None
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT conversation_id, seq, type, payload FROM ledger ORDER BY 1, 2"
    ).fetchall()
    db.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.parametrize(
    "args,env,message",
    [
        (["-p", "hi", "--model", "nosuch/model"], {}, "unknown provider"),
        (["-p", "hi", "--model", "no-slash"], {}, "PROVIDER/NAME"),
        (["-p", "hi"], {"OPENAI_BASE_URL": ""}, "OPENAI_API_KEY"),
        (["-p", "hi", "--session-id", "not-a-uuid"], {}, "is not a session id"),
        (["-p", "hi", "--resume", "0192f7a4-6c1e-7d2a-9b3e-000000000000"], {}, "no conversation"),
        (["-p", "   "], {}, "empty"),
        (["-p"], {}, "prompt is empty"),
        (["-p", "hi", "--approval-mode", "sometimes"], {}, "invalid choice"),
        (["-p", "-c", "hi"], {}, "no conversation in this directory"),
        (["export", "nope"], {}, "is not a session id"),
    ],
    ids=[
        "provider",
        "spec",
        "key",
        "session-id",
        "resume-unknown",
        "empty",
        "no-prompt",
        "approval-mode",
        "continue-none",
        "export-bad-id",
    ],
)
def test_bad_input_is_one_clear_line_and_changes_nothing(loopback, bastion, args, env, message):
    server = loopback([{"text": "seed"}])
    b = bastion(server)
    assert b.run("-p", "--session-id", SID, "seed").returncode == 0
    if args == ["-p", "-c", "hi"]:
        b.cwd = b.cwd.parent  # a directory with no conversation
    before = db_digest(b.home)
    out = b.run(*args, env=env, input="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert out.stdout == ""
    assert db_digest(b.home) == before


def test_unreachable_base_url_fails_the_run_clearly(bastion):
    b = bastion(None)
    out = b.run(
        "-p", "hi", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "BASTION_MAX_RETRIES": "1"}
    )
    assert out.returncode == 1
    assert "127.0.0.1:9" in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_corrupt_database_is_refused_and_left_alone(bastion):
    b = bastion(None)
    b.home.mkdir(parents=True)
    path = b.home / "bastion.sqlite"
    path.write_bytes(b"\x00garbage" * 1000)
    before = path.read_bytes()
    out = b.run("-p", "hi", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert out.returncode == 2 and "corrupt" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == before


def test_newer_schema_is_refused_and_left_alone(loopback, bastion):
    server = loopback([{"text": "seed"}])
    b = bastion(server)
    assert b.run("-p", "seed").returncode == 0
    db = sqlite3.connect(b.home / "bastion.sqlite")
    db.execute("UPDATE meta SET value = '42' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = db_digest(b.home)
    out = b.run("-p", "hi")
    assert out.returncode == 2 and "schema version 42" in out.stderr
    assert db_digest(b.home) == before
    assert os.path.exists(b.home / "bastion.sqlite")


def test_attach_follows_a_conversation_another_process_drives(loopback, bastion):
    server = loopback([{"text": SLOW, "chunk_size": 6, "delay_ms": 10}])
    b = bastion(server)
    driver = b.popen("-p", "--session-id", SID, "stream for a follower")
    try:
        wait_for(lambda: partial_text(b))
        follower = b.popen("attach", SID)
        printed = Collected(follower.stdout)
        assert driver.wait(timeout=60) == 0
        # It printed what it found, then followed the rest as it was committed.
        wait_for(lambda: printed.text().strip().endswith(SLOW.strip()), "the whole answer")
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=10)
        err = follower.stderr.read()
    finally:
        if driver.poll() is None:
            driver.kill()
    assert f"attached to {SID}" in err


def test_resuming_a_conversation_whose_directory_is_gone(loopback, bastion):
    server = loopback([{"text": "first"}])
    b = bastion(server)
    assert b.run("-p", "--session-id", SID, "hi").returncode == 0
    b.cwd.rename(b.cwd.parent / "moved")
    b.cwd = b.cwd.parent
    before = db_digest(b.home)
    out = b.run("-p", "--resume", SID, "again")
    assert out.returncode == 2 and "cannot open workspace" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert db_digest(b.home) == before
