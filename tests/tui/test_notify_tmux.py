"""Notifications in a real terminal (issue 40): with the terminal behind other
windows (the focus-out report a terminal sends, typed into the pane), a run that
ends rings the bell and sends OSC 9 and OSC 777 with bastion's own words; in front
again (focus-in), the next run's end is told to nobody. tmux's `pipe-pane` keeps
every byte the app wrote to its terminal; tmux itself marks the window's bell."""

from __future__ import annotations

from pathlib import Path

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import Tmux, bastion_bin, environment, wait_exit
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

DONE = b"\x1b]9;bastion: the run is done\x07"
DESKTOP = b"\x1b]777;notify;bastion;the run is done\x07"


def test_a_run_ending_behind_other_windows_rings_and_notifies(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    terminal = Tmux(tmp_path)
    written = tmp_path / "pane-output"
    try:
        turns = [{"text": "First done."}, {"text": "Second done."}]
        with LoopbackThread.start(turns, tmp_path / "server") as server:
            exit_file = terminal.start(
                [bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd
            )
            terminal.wait_for(lambda s: "type a request" in s, "the app to start")
            terminal.tmux("pipe-pane", "-o", "-t", "bastion", f"cat >> {written}")
            terminal.send("\x1b[O", literal=True)  # the terminal lost the focus
            terminal.send("first", literal=True)
            terminal.send("Enter")
            terminal.wait_for(lambda s: "First done." in s, "the first answer")
            terminal.wait_for(lambda _: DONE in written.read_bytes(), "the notification")
            out = written.read_bytes()
            assert DESKTOP in out and out.count(DONE) == 1
            bell = terminal.tmux("display", "-p", "-t", "bastion", "#{window_bell_flag}")
            assert bell.strip() == "1"
            terminal.send("\x1b[I", literal=True)  # in front again
            terminal.send("second", literal=True)
            terminal.send("Enter")
            terminal.wait_for(lambda s: "Second done." in s, "the second answer")
            terminal.send("C-c")
            terminal.send("C-c")
            assert wait_exit(exit_file) == 0
            assert written.read_bytes().count(DONE) == 1  # in front: nothing more told
    finally:
        terminal.kill()
