"""Issue 27 item 11 in tmux: Esc in the approval's rule-scope choice (after `a`) goes
back to the question and never interrupts the run; a second Esc then does."""

from __future__ import annotations

import time

import pytest

from runtime.testing.process import LoopbackThread
from tests.e2e.test_approval_tmux import write
from tests.tui.test_tmux import TMUX, bastion_bin, environment, tmux, wait_exit

__all__ = ["tmux"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)"),
]


@pytest.mark.parametrize("burst", [False, True], ids=["typed", "one-burst"])
def test_esc_in_the_scope_choice_goes_back_without_interrupting(tmp_path, tmux, burst):
    cwd = tmp_path / "work"
    (cwd / "docs").mkdir(parents=True)
    turns = [write("c1", "docs/notes.md", "new\n"), {"text": "Written."}]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        argv = [bastion_bin(), "--model", "openai/test", "write the notes"]
        exit_file = tmux.start(argv, environment(tmp_path, server), cwd)
        tmux.wait_for(lambda s: "Allow write_file docs/notes.md?" in s, "the approval")
        tmux.wait_for(lambda s: "a saves:" in s, "the rule `a` would save")
        if burst:  # `a` and Esc in one write, as a fast typist or a script sends them
            tmux.send("a", "Escape")
        else:
            tmux.send("a")
            tmux.wait_for(lambda s: "[s] this session" in s, "the scope choice")
            tmux.send("Escape")
        screen = tmux.wait_for(lambda s: "[a] always" in s, "back at the question")
        time.sleep(0.5)  # (the thing under test: an interrupt, had there been one, lands)
        screen = tmux.screen()
        assert "interrupted" not in screen and "Allow write_file docs/notes.md?" in screen
        tmux.send("y")
        tmux.wait_for(lambda s: "Written." in s, "the answer: the run went on")
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
    assert (cwd / "docs" / "notes.md").read_text() == "new\n"
