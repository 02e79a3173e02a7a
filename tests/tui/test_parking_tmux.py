"""The idle app in a real terminal (tui.parking): its harness process parks after
`idle_park` seconds and the app's memory is its own; `bastion -p --resume` meanwhile
meets the parked lease (ConversationBusy naming the app); typing wakes it and the
prompt is sent once and answered; a parked app killed leaves the session resumable
at once with nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from runtime.testing.process import LoopbackThread
from runtime.testing.waiting import gone, wait_for
from tests.tui.test_child import children
from tests.tui.test_tmux import Tmux, bastion_bin, environment
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0f"


def _app(term: Tmux) -> int:
    shell = int(term.tmux("list-panes", "-t", "bastion", "-F", "#{pane_pid}").strip())
    [app] = children(shell)
    return app


def _harness(app: int) -> int | None:
    for pid in children(app):
        try:
            if b"tui.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def _bastion(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [bastion_bin(), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def _user_texts(env: dict[str, str], cwd: Path) -> list[str]:
    exported = _bastion(env, cwd, "export", SID)
    return [e["text"] for e in json.loads(exported.stdout)["entries"] if e["kind"] == "user"]


def test_the_idle_app_parks_wakes_as_the_user_types_and_a_kill_loses_nothing(tmp_path):
    turns = [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third answer."}]
    term = Tmux(tmp_path)
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env = environment(tmp_path, server)
        config = tmp_path / "config" / "bastion"
        config.mkdir(parents=True)
        (config / "config.toml").write_text("idle_park = 0.5\n")  # (short: a test's wait)
        cwd = tmp_path / "work"
        cwd.mkdir()
        try:
            term.start([bastion_bin(), "--model", "openai/test", "--session-id", SID], env, cwd)
            term.wait_for(lambda s: "type a request" in s, "the app to start")
            term.send("one", literal=True)
            term.send("Enter")
            term.wait_for(lambda s: "First answer." in s and "done" in s, "the first answer")
            app = _app(term)
            wait_for(lambda: _harness(app) is None, "the harness process to park", timeout=20)
            term.wait_for(lambda s: "harness asleep" in s, "the status line to say so")
            busy = _bastion(env, cwd, "-p", "--resume", SID, "not sent")
            assert busy.returncode != 0 and f"pid {app}" in busy.stderr, busy.stderr
            term.send("t", literal=True)  # the first key starts it
            woken = wait_for(lambda: _harness(app), "the harness process to wake")
            term.wait_for(lambda s: "harness asleep" not in s, "the status line to say it is back")
            term.send("wo", literal=True)
            term.send("Enter")
            term.wait_for(lambda s: "Second answer." in s, "the second answer")
            wait_for(lambda: gone(woken), "the harness process to park again", timeout=20)
            sent = [r["messages"][-1]["content"] for r in server.requests()]
            assert sent == ["one", "two"]  # each once; "not sent" never reached the model
            os.kill(app, signal.SIGKILL)
            wait_for(lambda: gone(app), "the app to die")
        finally:
            term.kill()
        # The parked lease's process is gone: the session resumes at once.
        out = _bastion(env, cwd, "-p", "--resume", SID, "three", "--output-format", "json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["result"] == "Third answer."
        assert _user_texts(env, cwd) == ["one", "two", "three"]
