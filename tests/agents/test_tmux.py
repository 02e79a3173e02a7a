"""End to end in tmux: the installed `bastion` app delegates to a subagent; the
subagent's write asks on the parent's screen with the subagent named and is answered
there with `y`; the task row then opens (a mouse click) to the subagent's transcript,
live while it streams, and Enter comes back."""

from __future__ import annotations

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import TMUX, bastion_bin, environment, tmux, wait_exit

__all__ = ["tmux"]  # the fixture, shared with tests/tui/test_tmux.py

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)"),
]

WRITER = "---\nname: writer\ndescription: Writes files.\ntools: Read, Write\n---\nYou write.\n"
REPORT = " ".join(f"line{i:03d}" for i in range(300)) + " CHILD-REPORT-END"


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}


TASK = {"description": "make note", "prompt": "CHILD: write note.txt", "agent": "writer"}
TURNS = [
    {"match": "PARENT", "unless": ["CHILD-REPORT-END"], "text": "Delegating.",
     "tool_calls": [call("task", TASK)]},
    {"match": "CHILD", "unless": ["note.txt ("], "text": "CHILD-WORKING",
     "tool_calls": [call("write_file", {"path": "note.txt", "content": "from the child\n"})]},
    {"match": "CHILD", "repeat": True, "text": REPORT, "chunk_size": 8, "delay_ms": 40},
    {"match": "PARENT", "repeat": True, "text": "PARENT-DONE"},
]  # fmt: skip


def click(tmux, screen: str, needle: str) -> None:
    """A left click (SGR mouse report, as a terminal sends it) on the line with `needle`."""
    row = next(i for i, line in enumerate(screen.splitlines()) if needle in line)
    col = screen.splitlines()[row].index(needle) + 1
    tmux.send(f"\x1b[<0;{col + 1};{row + 1}M\x1b[<0;{col + 1};{row + 1}m", literal=True)


def test_a_subagent_asks_on_the_parents_screen_and_its_row_opens_live(tmp_path, tmux):
    cwd = tmp_path / "work"
    cwd.mkdir()
    agents = tmp_path / "config" / "bastion" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.md").write_text(WRITER)
    with LoopbackThread.start(TURNS, tmp_path / "server") as server:
        env = environment(tmp_path, server)
        argv = [bastion_bin(), "--model", "openai/test", "PARENT: delegate"]
        exit_file = tmux.start(argv, env, cwd)
        tmux.wait_for(
            lambda s: "subagent writer (make note) asks: Allow write_file note.txt?" in s,
            "the subagent's approval on the parent's screen",
        )
        assert not (cwd / "note.txt").exists()
        tmux.send("y")
        screen = tmux.wait_for(
            lambda s: (
                "click or Enter: its transcript" in s
                and "asks: Allow" not in s
                and (cwd / "note.txt").exists()
            ),
            "the write, the prompt gone, and the task row",
        )
        assert (cwd / "note.txt").read_text() == "from the child\n"
        click(tmux, screen, "click or Enter: its transcript")
        first = tmux.wait_for(
            lambda s: "subagent writer (make note)" in s and "line0" in s,
            "the subagent's transcript",
        )
        assert "CHILD-WORKING" in first or "note.txt" in first
        tmux.wait_for(
            lambda s: max(int(w[4:7]) for w in s.split() if w.startswith("line")) > 60,
            "its answer growing, live",
        )
        tmux.send("Enter")  # back to the parent
        tmux.wait_for(lambda s: "PARENT-DONE" in s, "the parent's answer", timeout=60)
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
