"""End to end in a real terminal: the installed `bastion` command inside tmux, against a
loopback OpenAI-compatible server process. Keys go in with `send-keys`; the screen comes
back with `capture-pane`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread

TMUX = shutil.which("tmux")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install tmux)"),
]

ANSWER = "Hello from the **loopback** model."


def bastion_bin() -> str:
    found = Path(sys.executable).parent / "bastion"
    path = str(found) if found.exists() else shutil.which("bastion")
    if path is None:
        pytest.fail(f"the bastion command is not installed next to {sys.executable}")
    return path


class Tmux:
    """One tmux session on a private server socket (never the user's tmux)."""

    def __init__(self, workdir: Path) -> None:
        self.socket = f"bastion-test-{uuid.uuid4().hex[:8]}"
        self.workdir = workdir

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout

    def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> Path:
        """Run `argv` in a 100x30 window; returns the file its exit code lands in."""
        exit_file = self.workdir / "exit-code"
        script = self.workdir / "run.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        script.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(cwd))}\n"
            f"{shlex.join(argv)}\necho $? > {shlex.quote(str(exit_file))}\n"
        )
        script.chmod(0o755)
        self.tmux("new-session", "-d", "-s", "bastion", "-x", "100", "-y", "30", str(script))
        return exit_file

    def send(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "bastion", *(["-l"] if literal else []), *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "bastion")

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the screen was:\n{screen}{self.logs()}")
            time.sleep(0.1)  # (poll interval)

    def logs(self, lines: int = 40) -> str:
        """The last lines of each harness log under this test's folder: what the app's
        harness process said (a failure that only shows on a loaded machine needs it)."""
        out = []
        for log in sorted(self.workdir.rglob("harness.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"\n--- {log} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "".join(out)

    def kill(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def tmux(tmp_path) -> Iterator[Tmux]:
    session = Tmux(tmp_path)
    try:
        yield session
    finally:
        session.kill()


@pytest.fixture
def server(tmp_path) -> Iterator[LoopbackThread]:
    turns = [{"text": ANSWER, "chunk_size": 4, "delay_ms": 5}]
    with LoopbackThread.start(turns, tmp_path / "server") as process:
        yield process


def environment(tmp_path: Path, server: LoopbackThread) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TZ")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        TERM="xterm-256color",
        COLORTERM="truecolor",
        BASTION_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        OPENAI_BASE_URL=server.base_url,
        LANG=os.environ.get("LANG", "C.UTF-8"),
    )
    return env


def wait_exit(exit_file: Path, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while not (exit_file.exists() and exit_file.read_text().strip()):
        if time.monotonic() > deadline:
            pytest.fail("bastion did not exit")
        time.sleep(0.1)  # (poll interval)
    return int(exit_file.read_text().strip())


def test_the_app_answers_a_typed_prompt_and_quits_on_ctrl_c_twice(tmp_path, tmux, server):
    cwd = tmp_path / "work"
    cwd.mkdir()
    exit_file = tmux.start(
        [bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd
    )
    tmux.wait_for(lambda s: "type a request" in s and "openai/test" in s, "the app to start")

    tmux.send("say hello", literal=True)
    tmux.send("Enter")
    screen = tmux.wait_for(lambda s: "Hello from the loopback model." in s, "the answer")
    screen = tmux.wait_for(lambda s: "done" in s, "the run to end")
    assert "say hello" in screen
    assert "**" not in screen  # rendered as Markdown

    tmux.send("C-c")
    tmux.wait_for(lambda s: "press Ctrl+C again to quit" in s, "the quit warning")
    assert not exit_file.exists()
    tmux.send("C-c")
    assert wait_exit(exit_file) == 0

    [request] = server.requests()
    assert request["messages"][-1] == {"role": "user", "content": "say hello"}


def test_plain_mode_answers_a_line_and_exits_on_ctrl_d(tmp_path, tmux, server):
    cwd = tmp_path / "work"
    cwd.mkdir()
    exit_file = tmux.start(
        [bastion_bin(), "--plain", "--model", "openai/test"], environment(tmp_path, server), cwd
    )
    tmux.wait_for(lambda s: "›" in s and "openai/test" in s, "the plain prompt")
    tmux.send("say hello", literal=True)
    tmux.send("Enter")
    tmux.wait_for(
        lambda s: "Hello from the loopback model." in s and s.rstrip().endswith("›"),
        "the answer and the next prompt",
    )
    tmux.send("C-d")
    assert wait_exit(exit_file) == 0


PASTED = "line one\nline two\nline three"


def paste(tmux: Tmux, text: str, *, bracketed: bool) -> None:
    """Paste `text` as a terminal does: bracketed (-p) when the app asked for it, or as
    bare lines (each newline arriving as Enter) when the terminal does not bracket."""
    tmux.tmux("set-buffer", "-b", "paste", text)
    tmux.tmux("paste-buffer", "-b", "paste", "-t", "bastion", *(["-p"] if bracketed else []))


def test_the_app_takes_a_pasted_block_as_one_prompt_and_says_how_to_resume(tmp_path, tmux, server):
    cwd = tmp_path / "work"
    cwd.mkdir()
    # The shell keeps the window after the app leaves (until a key), to show what it printed.
    script = f"{shlex.quote(bastion_bin())} --model openai/test; code=$?; read _; exit $code"
    exit_file = tmux.start(["sh", "-c", script], environment(tmp_path, server), cwd)
    tmux.wait_for(lambda s: "type a request" in s, "the app to start")
    paste(tmux, PASTED, bracketed=True)
    tmux.wait_for(lambda s: "line three" in s, "the pasted block in the prompt")
    assert server.requests() == []  # a paste never sends
    tmux.send("Enter")
    tmux.wait_for(lambda s: "Hello from the loopback model." in s, "the answer")
    tmux.send("C-c")
    tmux.send("C-c")
    screen = tmux.wait_for(lambda s: "resume with: bastion -r " in s, "the resume line")
    tmux.send("Enter")
    assert wait_exit(exit_file) == 0
    [request] = server.requests()
    assert request["messages"][-1] == {"role": "user", "content": PASTED}
    session_id = screen.split("resume with: bastion -r ", 1)[1].split()[0]
    assert len(session_id) == 36


def test_plain_mode_takes_unbracketed_pasted_lines_as_one_prompt(tmp_path, tmux, server):
    cwd = tmp_path / "work"
    cwd.mkdir()
    exit_file = tmux.start(
        [bastion_bin(), "--plain", "--model", "openai/test"], environment(tmp_path, server), cwd
    )
    tmux.tmux("set-option", "-t", "bastion", "remain-on-exit", "on")
    tmux.wait_for(lambda s: "›" in s and "openai/test" in s, "the plain prompt")
    paste(tmux, PASTED + "\n", bracketed=False)
    tmux.wait_for(
        lambda s: "Hello from the loopback model." in s and s.rstrip().endswith("›"),
        "the answer and the next prompt",
    )
    tmux.send("C-d")
    assert wait_exit(exit_file) == 0
    tmux.wait_for(lambda s: "resume with: bastion -r " in s, "the resume line")
    [request] = server.requests()
    assert request["messages"][-1] == {"role": "user", "content": PASTED}


def test_keys_typed_while_the_app_starts_reach_the_prompt(tmp_path, tmux, server):
    """Typed before the app has drawn anything (even before it has taken the terminal),
    a request and its Enter arrive whole, in order, and are sent once the session opens."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    tmux.start([bastion_bin(), "--model", "openai/test"], environment(tmp_path, server), cwd)
    tmux.send("say hello", literal=True)  # at once: the app is still importing
    tmux.send("Enter")
    tmux.wait_for(lambda s: "Hello from the loopback model." in s, "the answer")
    [request] = server.requests()
    assert request["messages"][-1] == {"role": "user", "content": "say hello"}
