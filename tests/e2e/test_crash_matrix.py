"""The crash matrix: SIGKILL the real `bastion -p` at every point where the durable
order changes hands, resume it, and check that nothing was lost or done twice.

One scripted task (runtime.testing.server): reasoning and text streamed with pauses,
then read a file, write a file, edit a file, run a command that appends one line,
then a long final answer with pauses. Each step is served while its result is not in
the request (`unless` markers), the way a model repeats what it did not see finish,
so the same script drives the first attempt and every resume.

A point is `NAME` or `NAME:N` (runtime.store.failpoints: the process SIGKILLs itself the
Nth time it gets there); `checkpoint.T:N` is the Nth checkpoint of the Tth model
turn streamed by that process (turn 5 is the final answer). Some cases crash again during the resume. For every case:
the resume finishes; the files are right; every entry committed before the kill is
still there (and its text only grew); every character emitted as a text delta
before the kill was in the store; no call has two results and no side effect ran
twice; every request was valid for the OpenAI wire format.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

INTRO = "Let me look at the files first. " * 6
FINAL = "".join(f"Step {i}: the change is in place and checked.\n" for i in range(40))
COMMAND = "grep -qx done log.txt 2>/dev/null || echo done >> log.txt; echo appended-ok"


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}  # llama.cpp-style repeats


TASK = [
    {"reasoning": "The user wants a small change. " * 4, "text": INTRO, "chunk_size": 16,
     "delay_ms": 8, "pauses": {"12": 400}, "unless": ["\talpha"],
     "tool_calls": [call("read_file", {"path": "a.txt"})]},
    {"text": "Now the new file.", "unless": ["b.txt (4 bytes"],
     "tool_calls": [call("write_file", {"path": "b.txt", "content": "bee\n", "overwrite": True})]},
    {"text": "And the edit.", "unless": ["Edited a.txt", "old_text was not found in 'a.txt'"],
     "tool_calls": [call("edit_file", {"path": "a.txt", "old_text": "beta", "new_text": "gamma"})]},
    {"text": "Last, the log.", "unless": ["appended-ok"],
     "tool_calls": [call("run_command", {"command": COMMAND})]},
    {"text": FINAL, "chunk_size": 24, "delay_ms": 6, "pauses": {"20": 300, "45": 300},
     "repeat": True},
]  # fmt: skip

# (first crash, crash during the resume or None)
POINTS = [
    ("admitted", None),
    ("turn.opened:1", None),
    ("checkpoint:1", None),
    ("checkpoint.1:1", None),
    ("call.intent:1", None),
    ("call.started:1", None),
    ("call.executed:1", None),
    ("call.result:1", None),
    ("steers.placed:1", None),
    ("turn.opened:2", None),
    ("call.intent:2", None),
    ("call.started:2", None),
    ("call.executed:2", None),
    ("call.result:2", None),
    ("call.started:3", None),
    ("call.executed:3", None),
    ("call.result:3", None),
    ("call.started:4", None),
    ("call.executed:4", None),
    ("call.result:4", None),
    ("turn.opened:5", None),
    ("checkpoint.5:2", None),
    ("checkpoint.5:6", None),
    ("call.executed:2", "recovered"),
    ("checkpoint.1:1", "checkpoint:1"),
    ("call.executed:4", "turn.opened:1"),
]


def run_bastion(bastion, *args: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(bastion.env)
    env.pop("BASTION_FAILPOINT", None)
    if failpoint:
        env["BASTION_FAILPOINT"] = failpoint
    return subprocess.run(
        bastion.cmd(*args), capture_output=True, text=True, cwd=bastion.cwd, env=env, timeout=90
    )


def store_state(
    home: Path, conv_id: str, url: str | None = None
) -> tuple[dict[str, tuple[str, str]], list[tuple]]:
    """Entries as {id: (status, text)} (a streaming entry's text is its committed chunks)
    and the tool-result rows, read straight from the file (or from the PostgreSQL
    database at `url`, the test's own client)."""
    if url is not None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            return _state(conn, conv_id, "%s", "(data::json ->> 'tool_call_id')")
    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        return _state(db, conv_id, "?", "json_extract(data, '$.tool_call_id')")
    finally:
        db.close()


def _state(db, conv_id: str, mark: str, call_id: str) -> tuple[dict, list[tuple]]:
    entries = {}
    for entry_id, status, text in db.execute(
        f"SELECT id, status, text FROM entries WHERE conversation_id = {mark} ORDER BY position",
        (conv_id,),
    ).fetchall():
        chunks = db.execute(
            f"SELECT text FROM chunks WHERE owner_id = {mark} AND kind = 'text' ORDER BY start",
            (entry_id,),
        ).fetchall()
        entries[entry_id] = (status, text + "".join(c[0] for c in chunks))
    results = db.execute(
        f"SELECT {call_id}, text FROM entries "
        f"WHERE conversation_id = {mark} AND kind = 'tool_result'",
        (conv_id,),
    ).fetchall()
    return entries, [tuple(r) for r in results]


def emitted(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the line the kill cut in half
        if event.get("type") == "text.delta":
            out.append(event)
    return out


def assert_valid_requests(requests: list[dict]) -> None:
    for body in requests:
        messages = body["messages"]
        i = 0
        while i < len(messages):
            message = messages[i]
            calls = message.get("tool_calls") or []
            if message["role"] == "assistant" and calls:
                ids = [c["id"] for c in calls]
                assert len(set(ids)) == len(ids), ids
                replies = [m.get("tool_call_id") for m in messages[i + 1 : i + 1 + len(ids)]]
                assert [m["role"] for m in messages[i + 1 : i + 1 + len(ids)]] == ["tool"] * len(
                    ids
                )
                assert replies == ids, (ids, replies)
                i += len(ids)
            else:
                assert message["role"] != "tool", "a tool message with no call before it"
            i += 1


@pytest.mark.parametrize(
    ("point", "again"), POINTS, ids=[f"{p}+{a}" if a else p for p, a in POINTS]
)
def test_sigkill_at_each_point_then_resume(loopback, bastion, point, again, team_store):
    server = loopback(TASK)
    b = bastion(server)
    if team_store is not None:
        b.env["BASTION_STORE"] = team_store
    (b.cwd / "a.txt").write_text("alpha beta\n")
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    common = ("--approval-mode", "full-auto", "--output-format", "stream-json")

    first = run_bastion(
        b, "-p", "make the change", "--session-id", conv_id, *common, failpoint=point
    )
    assert first.returncode == -signal.SIGKILL, (point, first.returncode, first.stderr[-2000:])
    before, _ = store_state(b.home, conv_id, team_store)
    for event in emitted(first.stdout):
        _status, text = before[event["entry_id"]]
        start, piece = event["offset"], event["text"]
        assert text[start : start + len(piece)] == piece, (point, "emitted but not stored")

    if again is not None:
        crashed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=again)
        assert crashed.returncode == -signal.SIGKILL, (again, crashed.stderr[-2000:])
    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, (point, resumed.returncode, resumed.stderr[-3000:])
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["result"].endswith(FINAL[-40:])

    assert (b.cwd / "a.txt").read_text() == "alpha gamma\n"
    assert (b.cwd / "b.txt").read_text() == "bee\n"
    assert (b.cwd / "log.txt").read_text() == "done\n"  # appended exactly once

    after, results = store_state(b.home, conv_id, team_store)
    for entry_id, (_status, text) in before.items():
        assert entry_id in after, (point, "a committed entry was lost")
        assert after[entry_id][1].startswith(text), (point, "committed text changed")
    keys = [key for key, _ in results]
    assert len(keys) == len(set(keys)), (point, "a call has two results")
    assert sum("Edited a.txt" in text for _, text in results) <= 1
    assert sum(text.endswith("appended-ok") for _, text in results) <= 1
    assert_valid_requests(server.requests())
    if team_store is not None:  # (the session was in PostgreSQL, not a file in the home)
        assert not (b.home / "bastion.sqlite").exists()


def test_sigkill_during_a_pause_keeps_everything_shown(loopback, bastion):
    """Killed from outside while the model pauses: what was shown is in the store."""
    server = loopback(TASK)
    b = bastion(server)
    (b.cwd / "a.txt").write_text("alpha beta\n")
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    proc = b.popen(
        "-p", "make the change", "--session-id", conv_id, "--approval-mode", "full-auto",
        "--output-format", "stream-json",
    )  # fmt: skip
    lines: list[str] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    shown = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if '"text.delta"' in line:
            shown += json.loads(line)["text"]
        if len(shown) >= 4 * 16:  # 8 reasoning and 4 text chunks, then a 400 ms pause
            break
    # (the thing under test: what was shown is committed within the 100 ms cadence:
    # killed past it, inside the model's pause)
    time.sleep(0.25)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=10)
    before, _ = store_state(b.home, conv_id)
    for event in emitted("".join(lines) + rest):
        _, text = before[event["entry_id"]]
        assert text[event["offset"] : event["offset"] + len(event["text"])] == event["text"]
    resumed = run_bastion(
        b, "-p", "--resume", conv_id, "--approval-mode", "full-auto", failpoint=None
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert (b.cwd / "log.txt").read_text() == "done\n"


APPROVAL_DRIVER = r"""
import asyncio, sys
from pathlib import Path
from runtime import Harness
from runtime.setup.load import load_config, model_resolver
from runtime.harness import new_conversation
from tui.session import toolbox_factory

async def main(home, cwd, conv_id):
    harness = await Harness.open(Path(home) / "bastion.sqlite",
                                 resolve_model=model_resolver(load_config(cwd)),
                                 toolbox_factory=toolbox_factory(Path(home)))
    harness.prepare(new_conversation(cwd, settings={"model": "openai/test-model"},
                                     conversation_id=conv_id))
    resuming = await harness.exists(conv_id)
    await harness.drive(conv_id, interactive=True, approval_mode="ask")
    if not resuming:
        item = await harness.submit(conv_id, "make the change")
        await harness.wait(item.id, conv_id)  # killed at approval.wait before it returns
        return
    while True:  # answer every approval as a person at the app would: y
        view = await harness.snapshot(conv_id)
        if view.active_run is None:
            print(view.runs[-1].state)
            break
        for call in view.tool_calls:
            if call.approval == "pending" and call.state == "pending":
                await harness.respond(conv_id, call.id, approve=True)
        await asyncio.sleep(0.05)  # (poll interval)
    await harness.close()

asyncio.run(main(*sys.argv[1:]))
"""


def test_sigkill_while_an_approval_waits_then_answer_it_after_the_resume(loopback, bastion):
    """An interactive session (as the app drives it) is killed while it waits for y/n;
    the approval is still pending in the store and is answered after the resume."""
    import sys

    server = loopback(TASK)
    b = bastion(server)
    (b.cwd / "a.txt").write_text("alpha beta\n")
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    env = dict(b.env, BASTION_FAILPOINT="approval.wait")
    killed = subprocess.run(
        [sys.executable, "-c", APPROVAL_DRIVER, str(b.home), str(b.cwd), conv_id],
        capture_output=True, text=True, cwd=b.cwd, env=env, timeout=60,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    db = sqlite3.connect(b.home / "bastion.sqlite")
    pending = db.execute(
        "SELECT name, approval, state FROM tool_calls WHERE conversation_id = ?", (conv_id,)
    ).fetchall()
    db.close()
    assert pending == [("read_file", "not_required", "done"), ("write_file", "pending", "pending")]
    assert not (b.cwd / "b.txt").exists()
    # After the resume the approval is still pending, and answering it goes on.
    env.pop("BASTION_FAILPOINT")
    resumed = subprocess.run(
        [sys.executable, "-c", APPROVAL_DRIVER, str(b.home), str(b.cwd), conv_id],
        capture_output=True, text=True, cwd=b.cwd, env=env, timeout=60,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout.strip() == "completed"
    assert (b.cwd / "b.txt").read_text() == "bee\n"
    assert (b.cwd / "a.txt").read_text() == "alpha gamma\n"
    assert (b.cwd / "log.txt").read_text() == "done\n"
    assert_valid_requests(server.requests())
