"""Issue 27 item 13 in a real terminal: while the app compacts, its status line says so
(what is summarised, how much is written) instead of "thinking"; Esc cancels the
summary, not the run, which answers uncompacted."""

from __future__ import annotations

import subprocess

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import bastion_bin, environment, pytestmark, tmux, wait_exit  # noqa: F401

BIG = "word " * 6000  # with an 8,000-token window: the next request must compact it


def test_esc_cancels_the_compaction_and_the_run_goes_on(tmp_path, tmux):  # noqa: F811
    turns = [
        {"text": "first answer"},
        {"text": "S" * 300, "chunk_size": 1, "delay_ms": 100},  # a 30 s summary
        {"text": "second answer"},
    ]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env = environment(tmp_path, server)
        config = tmp_path / "config" / "bastion"
        config.mkdir(parents=True)
        (config / "config.toml").write_text('[models."openai/test"]\ncontext_window = 8000\n')
        cwd = tmp_path / "work"
        cwd.mkdir()
        primed = subprocess.run(
            [bastion_bin(), "-p", "--model", "openai/test", BIG],
            env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert primed.returncode == 0, primed.stderr
        exit_file = tmux.start([bastion_bin(), "--model", "openai/test", "-c"], env, cwd)
        tmux.wait_for(lambda s: "first answer" in s, "the app with the first turn")
        tmux.send("second question", literal=True)
        tmux.send("Enter")
        screen = tmux.wait_for(lambda s: "compacting 2 entries" in s, "the compaction shown")
        assert "esc cancels" in screen and "thinking" not in screen
        # Issue 36: why it compacts, where the user looks, and that Esc declines it.
        tmux.wait_for(lambda s: "declines" in s and "window" in s, "the reason (a toast)")
        tmux.wait_for(lambda s: "written" in s, "the summary's progress")
        tmux.send("Escape")
        screen = tmux.wait_for(lambda s: "second answer" in s, "the answer, uncompacted")
        tmux.wait_for(lambda s: "● done" in s, "the run completed (not interrupted)")
        status = tmux.screen().rstrip().splitlines()[-1]  # (the reason's toast may linger)
        assert "compacting" not in status
        requests = server.requests()
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
    assert len(requests) == 3  # the answer, the cancelled summary, the answer
    assert "word word" in str(requests[2]["messages"])  # sent uncompacted
    assert "Summary of the conversation" not in str(requests[2]["messages"])
