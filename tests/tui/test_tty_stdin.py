"""The README's test command, typed in a terminal: pytest's stdin is a terminal.

pytest loads pdb, pdb loads GNU readline, and readline, seeing a terminal on stdin,
exports its size as COLUMNS and LINES into the process's environment (the C one:
`os.environ` does not show it, but every subprocess inherits it). The tmux tests'
server, and so the app in its window, inherited them, and Textual takes COLUMNS and
LINES over the terminal's own size: the app drew at the outer terminal's size in a
100x30 window. Run here under `script` with a terminal of another size (150x50) as
stdin, the tmux tests must still pass.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tui.test_tmux import pytestmark as tmux_marks

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    *tmux_marks,
    pytest.mark.skipif(shutil.which("script") is None, reason="script(1) is not installed"),
]


def test_the_tmux_tests_pass_with_a_terminal_as_pytest_stdin():
    # One process (-n 0): the outer suite already fills the cores, and two workers
    # would only add two more interpreters to start. (Its stdin is the terminal all
    # the same: that is what is tested.)
    inner = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
        "tests/tui/test_tmux.py::test_the_app_answers_a_typed_prompt_and_quits_on_ctrl_c_twice",
        "tests/tui/test_resume_tmux.py::test_app_resume_without_an_id_opens_the_picker",
    ]  # fmt: skip
    command = f"stty cols 150 rows 50 && test -t 0 && {shlex.join(inner)}"
    out = subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "2 passed" in out.stdout
