"""`bastion -r` without an id, in a real terminal: the picker (app) and the numbered list
(plain mode), then the chosen session opens with its history."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import Tmux, bastion_bin, environment, wait_exit
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path)
    try:
        yield session
    finally:
        session.kill()


def seed(env: dict[str, str], cwd: Path, prompt: str) -> str:
    out = subprocess.run(
        [bastion_bin(), "-p", "--model", "openai/test", "--output-format", "json", prompt],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout)["session_id"])


def setup(tmp_path: Path, server: LoopbackThread) -> tuple[dict[str, str], Path, list[str]]:
    env = environment(tmp_path, server)
    here, there = tmp_path / "work", tmp_path / "elsewhere"
    here.mkdir()
    there.mkdir()
    ids = [
        seed(env, here, "first question about parsing"),
        seed(env, there, "a question from elsewhere"),
        seed(env, here, "second question about caching"),
    ]
    return env, here, ids


def test_app_resume_without_an_id_opens_the_picker(tmp_path, term):
    turns = [{"text": f"answer {i}"} for i in range(4)]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env, here, _ = setup(tmp_path, server)
        exit_file = term.start([bastion_bin(), "--model", "openai/test", "-r"], env, here)
        screen = term.wait_for(lambda s: "Resume a session" in s, "the picker")
        lines = screen.splitlines()
        order = [
            next(i for i, line in enumerate(lines) if title in line)
            for title in ("second question", "first question", "a question from elsewhere")
        ]
        assert order == sorted(order)  # this directory's first, newest first
        assert "2 entries" in screen and "elsewhere" in screen
        term.send("parsing", literal=True)
        term.wait_for(lambda s: "second question" not in s, "the filter")
        term.send("Enter")
        screen = term.wait_for(
            lambda s: "answer 0" in s and "type a request" not in s, "the resumed session"
        )
        assert "first question about parsing" in screen
        term.send("C-c")
        term.send("C-c")
        assert wait_exit(exit_file) == 0


def test_plain_resume_without_an_id_lists_numbers(tmp_path, term):
    turns = [{"text": f"answer {i}"} for i in range(4)]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env, here, _ = setup(tmp_path, server)
        exit_file = term.start(
            [bastion_bin(), "--plain", "--model", "openai/test", "-r"], env, here
        )
        screen = term.wait_for(lambda s: "resume which (1-3" in s, "the numbered list")
        assert "  1. second question about caching" in screen
        assert "  2. first question about parsing" in screen
        assert "  3. a question from elsewhere" in screen
        term.send("3", literal=True)
        term.send("Enter")
        term.wait_for(lambda s: "answer 1" in s and s.rstrip().endswith("›"), "the history")
        term.send("C-d")
        assert wait_exit(exit_file) == 0
