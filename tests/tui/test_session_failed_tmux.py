"""Issue 37 item 11, seed 004 ("a storage error ends the Harness with `SessionFailed`"),
in a real terminal: the store "fills" while an answer streams (the failpoint
`store.full:@FLAG`: every write fails once FLAG exists; no root needed).

- The app neither hangs nor crashes: a notice that stays says the session stopped,
  why and how to resume; the transcript stays on screen; Ctrl+C twice leaves with the
  one line again and exit 1.
- `--plain` says it in one line and exits 1.
"""

from __future__ import annotations

from runtime.testing.process import LoopbackThread
from tests.e2e.test_storage_failure import SLOW, WORDS, saved_text
from tests.tui.test_tmux import Tmux, bastion_bin, environment
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux


def start(tmp_path, server, *args: str):
    term = Tmux(tmp_path)
    flag = tmp_path / "full"
    env = environment(tmp_path, server) | {"BASTION_FAILPOINT": f"store.full:@{flag}"}
    cwd = tmp_path / "work"
    cwd.mkdir()
    # The terminal stays after bastion, to be read (the line is on stderr).
    command = (
        f"{bastion_bin()} --model openai/test {' '.join(args)} count 2>&1; echo exit=$?; sleep 60"
    )
    term.start(["sh", "-c", command], env, cwd)
    return term, flag


def fill(term: Tmux, tmp_path, flag) -> None:
    term.wait_for(lambda s: "w0001" in s, "the answer to stream")
    store = tmp_path / "home" / "bastion.sqlite"
    term.wait_for(lambda s: len(saved_text(store)) > 100, "part of the answer saved")
    flag.touch()


def test_the_app_keeps_a_notice_and_leaves_with_exit_1(tmp_path):
    with LoopbackThread.start([SLOW], tmp_path / "s") as server:
        term, flag = start(tmp_path, server)
        try:
            fill(term, tmp_path, flag)
            # the status line says it, and a notice that stays says why (drawn in turn)
            screen = term.wait_for(
                lambda s: "session stopped" in s and "is full" in s, "the notice"
            )
            assert "Ctrl+C twice leaves" in screen and "disk" in screen, screen
            assert "● session stopped" in screen and "writing" not in screen, screen
            term.send("and then?", literal=True)  # a prompt after it: refused, said
            term.send("Enter")
            term.wait_for(lambda s: "not sent" in s, "the prompt refused")
            assert "w0001" in screen  # the transcript stays
            term.send("C-c")
            term.wait_for(lambda s: "again to quit" in s, "the quit warning")
            term.send("C-c")
            screen = term.wait_for(lambda s: "exit=" in s, "the app to exit", timeout=20)
        finally:
            term.kill()
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    assert "Traceback" not in screen, screen
    assert lines[-1] == "exit=1", screen
    said = [line for line in lines if line.startswith("bastion:")]
    assert len(said) == 1 and "the session stopped" in said[0], screen


def test_plain_mode_says_it_in_one_line_and_exits_1(tmp_path):
    with LoopbackThread.start([SLOW], tmp_path / "s") as server:
        term, flag = start(tmp_path, server, "--plain")
        try:
            fill(term, tmp_path, flag)
            screen = term.wait_for(lambda s: "exit=" in s, "plain mode to exit", timeout=30)
        finally:
            term.kill()
    assert "Traceback" not in screen, screen
    joined = " ".join(line.strip() for line in screen.splitlines())
    assert "exit=1" in joined, screen
    assert joined.count("bastion: the session stopped") == 1, screen
    assert WORDS[:20] in joined  # the answer streamed before it stays
