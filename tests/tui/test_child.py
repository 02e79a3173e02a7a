"""The harness process the app draws from (tui.child): it opens and drives the session,
serves it, reports a session it cannot open, and never outlives the app."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.model.errors import BastionError
from runtime.testing.process import LoopbackThread
from runtime.testing.waiting import gone, state, wait_for
from tests.tui.test_tmux import Tmux, bastion_bin, environment
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux
from tui.child import Child
from tui.cli import main_parser

SLOW = "The slow answer streams one piece at a time. " * 40
SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"


@pytest.fixture
def in_workdir(tmp_path, monkeypatch):
    """This process's environment as `bastion` would have it (the child inherits it)."""

    def setup(server: LoopbackThread | None) -> Path:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        monkeypatch.chdir(work)
        monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        url = server.base_url if server is not None else "http://127.0.0.1:9/v1"
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        return work

    return setup


async def test_the_child_opens_drives_and_serves_the_session(tmp_path, in_workdir):
    with LoopbackThread.start([{"text": "Hello from the child."}], tmp_path / "s") as server:
        in_workdir(server)
        child = Child.start(main_parser().parse_args(["--model", "openai/test"]), check_model=True)
        child.drive()
        harness, conv_id = await child.harness()
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "hi")
            while True:
                view = await harness.snapshot(conv_id)
                if view.runs and view.runs[-1].terminal:
                    break
                await channel.get()
            assert view.entries[-1].text == "Hello from the child."
            assert child.process.pid != os.getpid()
        finally:
            await harness.close()
        assert child.process.returncode == 0


def test_a_session_it_cannot_open_is_reported_and_the_child_exits(in_workdir):
    in_workdir(None)
    opts = main_parser().parse_args(["--model", "openai/test", "--resume", SID])
    child = Child.start(opts, check_model=False)
    child.drive()  # (its end may be gone already: no error here)
    with pytest.raises(BastionError) as raised:
        child.opened.result(timeout=30)
    assert SID in str(raised.value)
    assert isinstance(child.close(), BastionError)
    assert child.process.returncode == 2


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def harness_pid(shell: int, module: str = "tui.child") -> tuple[int, int]:
    """(the app's pid, its harness child's) under the tmux pane's shell."""
    for pid in children(shell):
        for grandchild in children(pid):
            if module.encode() in Path(f"/proc/{grandchild}/cmdline").read_bytes():
                return pid, grandchild
    raise AssertionError(f"no {module} process under the app")


def test_killing_the_app_ends_its_harness_and_the_session_resumes(tmp_path):
    turns = [{"text": SLOW, "chunk_size": 6, "delay_ms": 25}, {"text": "The resumed answer."}]
    term = Tmux(tmp_path)
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env = environment(tmp_path, server)
        cwd = tmp_path / "work"
        cwd.mkdir()
        try:
            term.start(
                [bastion_bin(), "--model", "openai/test", "--session-id", SID, "go"], env, cwd
            )
            term.wait_for(lambda s: "The slow answer" in s, "the answer to stream")
            shell = int(term.tmux("list-panes", "-t", "bastion", "-F", "#{pane_pid}").strip())
            app, harness = harness_pid(shell)
            os.kill(app, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not gone(harness) and time.monotonic() < deadline:
                time.sleep(0.05)  # (poll interval)
            assert gone(harness), "the harness process outlived the app"
        finally:
            term.kill()
        # Its lease was released: the session resumes at once, with what was streamed kept.
        out = subprocess.run(
            [bastion_bin(), "-p", "--resume", SID, "--output-format", "json"],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["result"] == "The resumed answer."
        exported = subprocess.run(
            [bastion_bin(), "export", SID], env=env, cwd=cwd, capture_output=True, text=True
        )
        entries = json.loads(exported.stdout)["entries"]
        partial = next(e["text"] for e in entries if e["kind"] == "assistant")
        assert partial and SLOW.startswith(partial)


def crash_mid_run(work: Path) -> None:
    """Session SID with a run left unfinished: `bastion -p` killed after a checkpoint."""
    crashed = subprocess.run(
        [bastion_bin(), "-p", "--model", "openai/test", "--session-id", SID, "go"],
        env={**os.environ, "BASTION_FAILPOINT": "checkpoint"},
        cwd=work,
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == -signal.SIGKILL


def test_a_harness_process_that_dies_while_opening_is_reported(tmp_path, in_workdir, monkeypatch):
    turns = [{"text": SLOW, "chunk_size": 6, "delay_ms": 25}]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        work = in_workdir(server)
        crash_mid_run(work)
        # Driving it again recovers that run: the harness process dies right there.
        monkeypatch.setenv("BASTION_FAILPOINT", "recovered")
        child = Child.start(main_parser().parse_args(["--resume", SID]), check_model=False)
        child.opened.result(timeout=30)
        child.drive()
        with pytest.raises(BastionError) as raised:
            child.driven.result(timeout=30)
        assert "harness process ended while opening the session (exit -9)" in str(raised.value)
        assert "harness.log" in str(raised.value)
        assert child.process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("bad", ["theme", "config"])
def test_a_launch_that_fails_before_driving_changes_nothing_stored(tmp_path, in_workdir, bad):
    """The harness process starts before the config and the theme are checked, but drives
    the session (takes its lease, recovers its run) only once told to: a bad --theme or
    config.toml leaves the store as it was."""
    turns = [{"text": SLOW, "chunk_size": 6, "delay_ms": 25}]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        work = in_workdir(server)
        crash_mid_run(work)  # a run left unfinished, which driving would recover
        store = tmp_path / "home" / "bastion.sqlite"
        before = store_state(store)
        argv = [bastion_bin(), "-r", SID]
        if bad == "theme":
            argv += ["--theme", "no-such-theme"]
            said = "no-such-theme"
        else:  # the user's own config (a project's is not even read until trusted)
            user = Path(os.environ["XDG_CONFIG_HOME"]) / "bastion" / "config.toml"
            user.parent.mkdir(parents=True, exist_ok=True)
            user.write_text("model = [unclosed\n")
            said = "config.toml"
        out = subprocess.run(
            argv,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=15,  # at once: nothing waits for a report the child will not send
        )
        assert out.returncode == 2
        assert said in out.stderr and out.stderr.count("\n") == 1, out.stderr
        assert store_state(store) == before
        assert before[1] == [("running",)]  # (so driving would have changed it)


def store_state(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The conversations' versions and the runs' states, read without writing."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        versions = db.execute("SELECT id, version FROM conversations").fetchall()
        return versions, db.execute("SELECT state FROM runs").fetchall()
    finally:
        db.close()


WATCHER = """
import os, sys, time
from pathlib import Path
from tui.child import _wait_for_parent
if os.fork() == 0:  # the harness process's watch, under a parent (the app) to be killed
    parent = os.getppid()
    Path(sys.argv[1]).write_text(str(os.getpid()))
    _wait_for_parent(parent)
    Path(sys.argv[2]).write_text("orphaned")
    os._exit(0)
time.sleep(60)  # (the thing under test: the app, alive until killed)
"""


def _switches(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds are Linux's")
def test_the_orphan_watch_sleeps_until_the_app_dies_then_wakes_at_once(tmp_path):
    started, woke = tmp_path / "watching", tmp_path / "orphaned"
    app = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(started), str(woke)], cwd=Path(__file__).parents[2]
    )
    try:
        # (its pid, once written whole: the file exists a moment before it is)
        watcher = int(wait_for(lambda: started.exists() and started.read_text(), "the watcher"))
        wait_for(lambda: state(watcher) == "S", "the watcher to block")  # (in its wait)
        before = _switches(watcher)
        time.sleep(0.5)  # (the span it must sleep through: polling woke it ten times)
        assert _switches(watcher) - before <= 1 and not woke.exists()
    finally:
        app.kill()
        app.wait()
    wait_for(lambda: woke.exists() and woke.read_text() == "orphaned", "the watcher to wake")
