"""Copying out of the app in a real terminal (issue 40): text dragged over with the
mouse is copied by Ctrl+C, through OSC 52, so it reaches the clipboard over SSH and
in tmux; `/copy` copies the last answer. The installed `bastion` runs in tmux with
`set-clipboard on`, which turns an OSC 52 write into a paste buffer, as a terminal
puts it on the clipboard; the mouse is the terminal's own SGR mouse reports."""

from __future__ import annotations

from pathlib import Path

from runtime.testing.process import LoopbackThread
from tests.hostile.test_shown_terminal import Terminal
from tests.tui.test_tmux import bastion_bin, environment, wait_exit
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

ANSWER = "The quick brown fox jumps over the lazy dog."


def mouse(terminal: Terminal, button: int, column: int, row: int, *, release: bool = False) -> None:
    """An SGR mouse report (1-based cell) typed into the pane, as a terminal sends it."""
    end = "m" if release else "M"
    terminal.send(f"\x1b[<{button};{column};{row}{end}", literal=True)


def find(screen: str, text: str) -> tuple[int, int]:
    """The 1-based (column, row) of `text` on the screen."""
    for row, line in enumerate(screen.splitlines(), start=1):
        if text in line:
            return line.index(text) + 1, row
    raise AssertionError(f"{text!r} is not on the screen:\n{screen}")


def test_a_mouse_selection_is_copied_by_ctrl_c_and_copy_copies_the_answer(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    terminal = Terminal(tmp_path)
    turns = [{"text": ANSWER}]
    try:
        with LoopbackThread.start(turns, tmp_path / "server") as server:
            argv = [bastion_bin(), "--model", "openai/test"]
            exit_file = terminal.start(argv, environment(tmp_path, server), cwd)
            terminal.wait_for(lambda s: "type a request" in s, "the app to start")
            terminal.send("say it", literal=True)
            terminal.send("Enter")
            screen = terminal.wait_for(lambda s: ANSWER in s, "the answer")
            column, row = find(screen, "quick brown fox")
            mouse(terminal, 0, column, row)  # press on "quick"
            last = column + len("quick brown") - 1  # the cell of its last letter
            mouse(terminal, 32, last, row)  # drag (the button held)
            mouse(terminal, 0, last, row, release=True)
            terminal.send("C-c")
            terminal.wait_for(lambda s: "copied 11 characters" in s, "the copy's notice")
            assert terminal.clipboard() == "quick brown"
            assert "press Ctrl+C again to quit" not in terminal.screen()  # copied, not quitting
            terminal.send("/copy", literal=True)
            # (Enter once the prompt shows it all, not into the command completions)
            terminal.wait_for(lambda s: "│ /copy " in s, "/copy in the prompt")
            terminal.send("Enter")
            terminal.wait_for(lambda s: "copied the last answer" in s, "/copy's line")
            assert ANSWER in terminal.clipboard()
            terminal.send("C-c")
            terminal.send("C-c")
            assert wait_exit(exit_file) == 0
    finally:
        terminal.kill()


async def test_ctrl_c_copies_text_marked_in_the_prompt_and_quits_only_without(harness_process):
    """The app over its harness process, the prompt's half: marked prompt text is copied
    (not cut, the quit not armed); with nothing selected Ctrl+C arms the quit as before."""
    from tests.tui.conftest import SIZE, wait_for
    from tui.widgets.prompt import PromptInput
    from tui.widgets.status import StatusBar

    app = harness_process([]).app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        prompt.set_value("keep this draft")
        prompt.select_all()
        await pilot.press("ctrl+c")
        assert app.clipboard == "keep this draft"
        assert prompt.text == "keep this draft" and not app._quit_armed
        assert app.query_one(StatusBar)._notice == "copied 15 characters"
        prompt.move_cursor((0, 0))  # nothing selected now
        await pilot.press("ctrl+c")
        assert app._quit_armed and app.is_running
