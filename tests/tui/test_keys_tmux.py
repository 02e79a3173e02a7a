"""Issue 40's keys in a real terminal, the installed `bastion` in tmux: Ctrl+G edits
the prompt in $VISUAL (a script standing in for the user's editor), Ctrl+V attaches
the clipboard's image (a `xclip` on PATH standing in for the system's clipboard tool,
which the app asks as it would the real one), and Shift+Tab reaches plan mode, in
which a write is refused by the harness, not only by the prompt."""

from __future__ import annotations

import io
import stat
from pathlib import Path

from PIL import Image

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import Tmux, bastion_bin, environment, wait_exit
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def status(screen: str) -> str:
    """The status line: the screen's last line with text."""
    return [line for line in screen.splitlines() if line.strip()][-1]


def png(tmp_path: Path) -> Path:
    out = io.BytesIO()
    Image.new("RGB", (40, 20), (0, 128, 255)).save(out, format="PNG")
    path = tmp_path / "clip.png"
    path.write_bytes(out.getvalue())
    return path


def test_ctrl_g_ctrl_v_and_shift_tab_in_a_real_terminal(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    tools = tmp_path / "bin"
    tools.mkdir()
    script(tools / "xclip", f"cat {png(tmp_path)}")
    editor = script(tmp_path / "editor", 'printf "%s from the editor\\n" "$(cat "$1")" > "$1"')
    write = {"tool_calls": [{"id": "w1", "name": "write_file",
                             "arguments": {"path": "plan.txt", "content": "x"}}]}  # fmt: skip
    turns = [{"text": "Saw the image."}, write, {"text": "Planned only."}]
    terminal = Tmux(tmp_path)
    try:
        with LoopbackThread.start(turns, tmp_path / "server") as server:
            env = environment(tmp_path, server)
            config = tmp_path / "config" / "bastion" / "config.toml"
            config.parent.mkdir(parents=True)
            config.write_text('[models."openai/test"]\nimages = true\n')  # it takes images
            env.update(VISUAL=str(editor), PATH=f"{tools}:{env['PATH']}", DISPLAY=":0")
            exit_file = terminal.start([bastion_bin(), "--model", "openai/test"], env, cwd)
            terminal.wait_for(lambda s: "type a request" in s, "the app to start")
            terminal.send("look", literal=True)
            terminal.send("C-g")
            terminal.wait_for(lambda s: "look from the editor" in s, "the editor's text")
            terminal.send("C-v")
            terminal.wait_for(lambda s: "@" in s and "clip-" in s, "the pasted image's path")
            terminal.send("Enter")
            terminal.wait_for(lambda s: "Saw the image." in s, "the answer")
            sent = server.requests()[0]["messages"][-1]["content"]
            parts = sent if isinstance(sent, list) else []
            assert any(p.get("type") == "image_url" for p in parts), sent
            assert "look from the editor" in str(sent)
            for mode in ("auto-edit", "full-auto", "plan"):  # Shift+Tab, one mode a press
                terminal.send("BTab")
                terminal.wait_for(lambda s, m=mode: f"·  {m}  ·" in status(s), f"{mode} mode")
            terminal.send("make a plan", literal=True)
            terminal.send("Enter")
            terminal.wait_for(lambda s: "Planned only." in s, "the planning answer")
            assert not (cwd / "plan.txt").exists()  # refused by the harness in plan mode
            refused = [m for m in server.requests()[-1]["messages"] if m["role"] == "tool"]
            assert "plan mode" in refused[-1]["content"]
            terminal.send("C-c")
            terminal.send("C-c")
            assert wait_exit(exit_file) == 0
    finally:
        terminal.kill()
