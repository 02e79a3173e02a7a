"""Issue 25, item 3: the app's harness process dies under it (killed, out of memory):
the app ends with one line naming it and exit code 2, never a traceback."""

from __future__ import annotations

import os
import signal

from runtime.testing.process import LoopbackThread
from tests.tui.test_child import children, harness_pid
from tests.tui.test_tmux import Tmux, bastion_bin, environment
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

SLOW = "The slow answer streams one piece at a time. " * 60


def test_harness_gone_the_app_says_so_in_one_line_and_exits_2(tmp_path):
    term = Tmux(tmp_path)
    turn = {"text": SLOW, "chunk_size": 6, "delay_ms": 25}
    with LoopbackThread.start([turn], tmp_path / "s") as server:
        env = environment(tmp_path, server)
        cwd = tmp_path / "work"
        cwd.mkdir()
        try:
            # The terminal stays after the app, to be read: the app draws on stderr.
            command = f"{bastion_bin()} --model openai/test go; echo exit=$?; sleep 60"
            term.start(["sh", "-c", command], env, cwd)
            term.wait_for(lambda s: "The slow answer" in s, "the answer to stream")
            shell = int(term.tmux("list-panes", "-t", "bastion", "-F", "#{pane_pid}").strip())
            _, harness = harness_pid(children(shell)[0])
            os.kill(harness, signal.SIGKILL)
            screen = term.wait_for(lambda s: "exit=" in s, "the app to exit", timeout=20)
        finally:
            term.kill()
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    assert "Traceback" not in screen, screen
    assert lines[-1] == "exit=2", screen
    said = [line for line in lines if line.startswith("bastion:")]
    assert len(said) == 1 and "the harness process ended" in said[0], screen
    # The resume hint, the one line (wrapped at 100 columns) and the exit code: no more.
    assert lines[0].startswith("resume with:") and len(lines) <= 4, screen
