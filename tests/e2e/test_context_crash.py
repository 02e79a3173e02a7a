"""Issue 37 items 6 and 10 across a SIGKILL: a driving process (`runtime.testing.drive`,
reached over its attach socket as `bastion attach` reaches it) killed at a named point
(runtime.store.failpoints) just after a supersede, an urgent input or a reset's note
was decided; a new process resumes the session and the decision holds, or, for a
note not yet committed, nothing changed and the reset can be done again."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from runtime import HarnessClient, read_token, socket_path
from runtime.ipc.wire import Connection
from runtime.model.records import InboxMode
from runtime.run.urgent import URGENT_REASON
from tests.e2e.test_attach import Proc

pytestmark = pytest.mark.e2e

SLOW = "this partial answer streams slowly " * 30


def driving(bastion, conv_id: str, failpoint: str | None, prompt: str | None = None) -> Proc:
    args = [sys.executable, "-m", "runtime.testing.drive", "--session-id", conv_id,
            "--cwd", str(bastion.cwd), "--model", "openai/test-model"]  # fmt: skip
    env = dict(bastion.env)
    env.pop("BASTION_FAILPOINT", None)
    if failpoint:
        env["BASTION_FAILPOINT"] = failpoint
    proc = Proc([*args, *(["--prompt", prompt] if prompt else [])], env, bastion.cwd)
    proc.wait_for("serving ")
    return proc


async def client_of(bastion, conv_id: str) -> HarnessClient:
    path = socket_path(bastion.home, conv_id)
    conn = await Connection.unix(str(path))
    return await HarnessClient.connect(conn, client="test", token=read_token(path))


def rows(home: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(home / "bastion.sqlite") as db:
        return db.execute(sql, params).fetchall()


def killed(proc: Proc) -> None:
    assert proc.proc.wait(20) == -signal.SIGKILL, proc.text("err")


def until_partial(home: Path, conv_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = rows(home, "SELECT count(*) FROM chunks WHERE conversation_id = ?", conv_id)
        if found[0][0] > 2:
            return
        time.sleep(0.02)  # (poll interval: the other process checkpoints)
    raise AssertionError("no partial was checkpointed")


CONV = "01a24600-0000-7000-8000-00000000c0de"


async def test_sigkill_after_supersede_the_partial_stays_out(loopback, bastion):
    server = loopback([{"text": SLOW, "chunk_size": 4, "delay_ms": 20}, {"text": "FRESH"}])
    b = bastion(server)
    a = driving(b, CONV, "superseded", prompt="tell me slowly")
    until_partial(b.home, CONV)
    client = await client_of(b, CONV)
    with pytest.raises(Exception):  # noqa: B017 (the process dies mid-call)
        await client.supersede(CONV)
    killed(a)
    again = driving(b, CONV, None)
    try:
        client = await client_of(b, CONV)
        item = await client.submit(CONV, "something else")
        assert (await client.wait(item.id, CONV)).state == "completed"
        [(state, reason)] = rows(b.home, "SELECT state, reason FROM runs WHERE inbox_id != ?",
                                 item.id)  # fmt: skip
        assert (state, reason) == ("interrupted", "superseded")
        sent = json.dumps(server.requests()[-1]["messages"])
        assert "tell me slowly" in sent and "streams slowly" not in sent
        await client.close()
    finally:
        again.stop()


async def test_sigkill_after_an_urgent_admission_it_still_runs_next(loopback, bastion):
    server = loopback([{"text": SLOW, "chunk_size": 4, "delay_ms": 20}, {"text": "URGENT DONE"},
                       {"text": "B DONE"}])  # fmt: skip
    b = bastion(server)
    a = driving(b, CONV, "admitted:3", prompt="tell me slowly")  # 1: the prompt, 2: B, 3: C
    until_partial(b.home, CONV)
    client = await client_of(b, CONV)
    item_b = await client.submit(CONV, "then B", mode=InboxMode.FOLLOW_UP)
    with pytest.raises(Exception):  # noqa: B017 (the process dies mid-call)
        await client.submit(CONV, "urgent C", mode=InboxMode.INTERRUPT_NEXT)
    killed(a)
    [(c_id,)] = rows(b.home, "SELECT id FROM inbox WHERE text = 'urgent C'")
    again = driving(b, CONV, None)
    try:
        client = await client_of(b, CONV)
        run_c, run_b = await client.wait(c_id, CONV), await client.wait(item_b.id, CONV)
        assert run_c.state == run_b.state == "completed" and run_c.inbox_id == c_id
        assert run_c.created_at < run_b.created_at
        [(reason,)] = rows(b.home, "SELECT reason FROM runs WHERE inbox_id NOT IN (?, ?)",
                           c_id, item_b.id)  # fmt: skip
        assert reason == URGENT_REASON
        last = [json.dumps(r["messages"][-1]) for r in server.requests()[1:]]
        assert "urgent C" in last[0] and "then B" in last[1]
        await client.close()
    finally:
        again.stop()


async def test_sigkill_while_the_note_is_written_changes_nothing(loopback, bastion):
    server = loopback([{"text": "FIRST ANSWER"}, {"text": "NOTE ONE"}, {"text": "NOTE TWO"},
                       {"text": "AFTER"}])  # fmt: skip
    b = bastion(server)
    assert b.run("-p", "--session-id", CONV, "FIRST PROMPT").returncode == 0
    before = rows(b.home, "SELECT id, kind, text FROM entries ORDER BY position")
    a = driving(b, CONV, "reset.noted")
    client = await client_of(b, CONV)
    with pytest.raises(Exception):  # noqa: B017 (the process dies mid-call)
        await client.reset(CONV)
    killed(a)
    assert rows(b.home, "SELECT id, kind, text FROM entries ORDER BY position") == before
    again = driving(b, CONV, None)
    try:
        client = await client_of(b, CONV)
        assert (await client.reset(CONV)).text == "NOTE TWO"
        item = await client.submit(CONV, "go on")
        assert (await client.wait(item.id, CONV)).state == "completed"
        sent = json.dumps(server.requests()[-1]["messages"])
        assert "NOTE TWO" in sent and "FIRST PROMPT" not in sent and "NOTE ONE" not in sent
        await client.close()
    finally:
        again.stop()
