"""`bastion attach` across processes: A drives a session, B attaches to it and acts.

A is `python -m runtime.testing.drive` (a driving process with no screen, so its
approvals wait for an answer); B is the real `bastion attach ID`, typed at
through a pipe. Both talk to a loopback model server process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runtime.model.ids import uuid7
from runtime.testing.process import LoopbackThread

ANSWER = "streamed slowly, two characters at a time, so deltas show it grow"
LONG = "this answer goes on and on " * 20


class Proc:
    """A child process whose stdout and stderr are read as they come, with timestamps."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self.out: list[tuple[float, str]] = []
        self.err: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, into), daemon=True).start()

    def _read(self, stream, into) -> None:
        fd = stream.fileno()
        while chunk := os.read(fd, 65536):
            with self._lock:
                into.append((time.monotonic(), chunk.decode("utf-8", errors="replace")))

    def text(self, which: str = "out") -> str:
        with self._lock:
            return "".join(t for _, t in getattr(self, which))

    def wait_for(self, needle: str, which: str = "out", timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text(which):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"{needle!r} not in {which} (exit {self.proc.poll()}):\n"
                    f"--- stdout\n{self.text('out')}\n--- stderr\n{self.text('err')}"
                )
            time.sleep(0.01)  # (poll interval)

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def procs():
    started: list[Proc] = []
    yield started
    for proc in reversed(started):
        proc.stop()


def drive(bastion, procs, conv_id: str) -> Proc:
    a = Proc(
        [sys.executable, "-m", "runtime.testing.drive", "--session-id", conv_id,
         "--cwd", str(bastion.cwd), "--model", "openai/test-model", "--approval-mode", "ask"],
        bastion.env, bastion.cwd,
    )  # fmt: skip
    procs.append(a)
    a.wait_for("serving ")
    return a


def attach(bastion, procs, conv_id: str) -> Proc:
    b = Proc(bastion.cmd("attach", conv_id), bastion.env, bastion.cwd)
    procs.append(b)
    return b


def checkpoints(home: Path, conv_id: str, text: str) -> int:
    """How many text checkpoints the ledger holds for the answer `text`."""
    import sqlite3

    from runtime.store import ledger

    with sqlite3.connect(home / "bastion.sqlite") as db:
        (entry_id,) = db.execute(
            "SELECT id FROM entries WHERE conversation_id = ? AND text = ?", (conv_id, text)
        ).fetchone()
        events = ledger.read(db, conv_id, 0, 1_000_000)
    return sum(e.type == "entry.text_appended" and e.entry_id == entry_id for e in events)


def test_a_second_terminal_watches_deltas_queues_interrupts_and_approves(loopback, bastion, procs):
    server: LoopbackThread = loopback(
        [
            {"match": "first", "text": ANSWER, "chunk_size": 2, "delay_ms": 40},
            {"match": "followup-please", "text": "FOLLOWUP-ANSWER"},
            {"match": "long-third", "text": LONG, "chunk_size": 1, "delay_ms": 20},
            {
                "match": "please-write",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "name": "write_file",
                        "arguments": {"path": "note.txt", "content": "from attach"},
                    }
                ],
            },
            {"text": "WROTE-IT"},
        ]
    )
    bs = bastion(server)
    conv_id = uuid7()
    a = drive(bs, procs, conv_id)
    b = attach(bs, procs, conv_id)
    b.wait_for("live from the process driving it", "err")

    # A prompt typed at B starts a run in A; B sees it stream as deltas.
    b.type("first")
    b.wait_for(ANSWER[:6])
    b.type("/queue followup-please")
    b.wait_for("queued (follow_up): followup-please", "err")
    b.wait_for(ANSWER)
    start = b.text().index(ANSWER[:6])
    end = start + len(ANSWER)
    with b._lock:
        reads = list(b.out)
    growth, seen = 0, 0
    for _, chunk in reads:  # reads of B's stdout that ended inside the answer: each grew it
        seen += len(chunk)
        growth += start < seen <= end
    # The follow-up B queued is the next run A answers.
    b.wait_for("FOLLOWUP-ANSWER")
    made = checkpoints(bs.home, conv_id, ANSWER)
    print(f"answer shown in {growth} steps; {made} checkpoints")
    assert growth > made + 3, (growth, made)

    # B interrupts A's next run while it streams.
    b.type("long-third")
    b.wait_for(LONG[:30])
    b.type("/interrupt")
    b.wait_for("[run interrupted]")
    b.wait_for("interrupted", "err")
    assert LONG not in b.text()

    # A waits on an approval; B answers it.
    b.type("please-write")
    b.wait_for("allow write_file")
    assert not (bs.cwd / "note.txt").exists()
    b.type("y")
    b.wait_for("WROTE-IT")
    assert (bs.cwd / "note.txt").read_text() == "from attach"

    # An answer that lost the race: nothing waits for approval now.
    b.type("y")
    b.wait_for("nothing is waiting for approval", "err")
    b.type("/quit")
    assert b.proc.wait(10) == 0
    assert a.proc.poll() is None  # A drives on


def test_attach_drives_the_session_when_its_driver_dies(loopback, bastion, procs):
    """Any client may drive: when the process driving the session is killed, attach
    reaches it again and, with no one else driving it, drives it itself."""
    server = loopback([{"text": "answered by the attached terminal"}])
    bs = bastion(server)
    conv_id = uuid7()
    a = drive(bs, procs, conv_id)
    b = attach(bs, procs, conv_id)
    b.wait_for(f"live from the process driving it (pid {a.proc.pid})", "err")

    a.stop(signal.SIGKILL)  # a crash: its socket file is left behind
    b.wait_for("the process driving it went, so this one drives it now", "err")
    b.type("who answers this?")
    b.wait_for("> who answers this?")
    b.wait_for("answered by the attached terminal")
    b.type("/quit")
    assert b.proc.wait(10) == 0
    a2 = drive(bs, procs, conv_id)  # the lease was released: another driver takes it
    a2.wait_for("serving ")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_attach_on_a_terminal_is_the_app_and_acts_on_the_session(
    tmp_path, loopback, bastion, procs
):
    from tests.tui.test_tmux import Tmux, wait_exit

    server = loopback([{"text": "Answered for the attached screen."}])
    bs = bastion(server)
    conv_id = uuid7()
    drive(bs, procs, conv_id)
    tmux = Tmux(tmp_path)
    try:
        env = bs.env | {"TERM": "xterm-256color", "COLORTERM": "truecolor"}
        exit_file = tmux.start([*bs.cmd("attach", conv_id)], env, bs.cwd)
        tmux.wait_for(lambda s: "attached · live" in s, "the attached app")
        tmux.send("say hello", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "Answered for the attached screen." in s, "the answer")
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
    finally:
        tmux.kill()


def test_attach_to_an_unknown_session_says_so(bastion):
    out = bastion().run("attach", uuid7(), "--plain")
    assert out.returncode == 2
    assert "no conversation" in out.stderr and out.stderr.count("\n") == 1
