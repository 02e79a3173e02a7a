"""End to end in tmux: the installed `bastion` asks to write a file, shows the diff and
the rule `a` would save; `a` then `s` saves it for the session, and the next write
under the same folder runs without asking (its row says which rule allowed it)."""

from __future__ import annotations

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import TMUX, bastion_bin, environment, tmux, wait_exit

__all__ = ["tmux"]  # the fixture, shared with tests/tui/test_tmux.py

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)"),
]


def write(call_id: str, path: str, content: str) -> dict:
    arguments = {"path": path, "content": content, "overwrite": True}
    call = {"id": call_id, "name": "write_file", "arguments": arguments}
    return {"tool_calls": [call]}


def test_always_allow_a_write_shows_the_diff_and_saves_the_rule(tmp_path, tmux):
    cwd = tmp_path / "work"
    (cwd / "docs").mkdir(parents=True)
    (cwd / "docs" / "notes.md").write_text("# Notes\nold line\n")
    turns = [
        write("c1", "docs/notes.md", "# Notes\nnew line\n"),
        write("c2", "docs/more.md", "more\n"),
        {"text": "Both written."},
    ]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env = environment(tmp_path, server)
        argv = [bastion_bin(), "--model", "openai/test", "update the notes"]
        exit_file = tmux.start(argv, env, cwd)
        screen = tmux.wait_for(
            lambda s: "Allow write_file docs/notes.md?" in s and "a saves: edits under docs/" in s,
            "the approval with its rule",
        )
        assert "--- a/docs/notes.md" in screen and "+++ b/docs/notes.md" in screen
        assert "-old line" in screen and "+new line" in screen
        assert "[a] always" in screen
        tmux.send("a")
        tmux.wait_for(lambda s: "[s] this session" in s, "the scope choice")
        tmux.send("s")
        tmux.wait_for(lambda s: "saved to this session" in s, "the notice")
        screen = tmux.wait_for(lambda s: "Both written." in s, "the answer")
        assert "allowed by edits under docs/" in screen
        assert "Allow write_file docs/more.md" not in screen  # never asked
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
        assert len(server.requests()) == 3
    assert (cwd / "docs" / "notes.md").read_text() == "# Notes\nnew line\n"
    assert (cwd / "docs" / "more.md").read_text() == "more\n"
    assert not (cwd / ".bastion").exists()  # a session rule stays in the store
