"""Issue 38: `bastion PROMPT` without a terminal, and an app whose terminal goes away.

Without a terminal (a script, CI, an editor that spawned it) the app would draw
into a pipe and wait for keys forever: it says in one line what to run instead
and exits 2, having stored nothing. An app whose terminal closes (the tmux pane
killed: SIGHUP) ends, and its harness process with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.tui.test_tmux import Tmux, bastion_bin, environment, server  # noqa: F401


def test_without_a_terminal_the_app_says_to_use_print_mode_and_stores_nothing(tmp_path):
    home = tmp_path / "home"
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "BASTION_HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }  # fmt: skip
    out = tmp_path / "out.txt"
    with open(os.devnull, "rb") as stdin, open(out, "wb") as stdout:
        done = subprocess.run(
            [bastion_bin(), "--model", "openai/test", "hello"],
            stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    said = done.stderr.decode().strip().splitlines()
    assert len(said) == 1 and "needs a terminal" in said[0] and 'bastion -p "PROMPT"' in said[0]
    assert out.read_bytes() == b""  # no escape codes drawn into the file
    assert not list(home.glob("**/*.sqlite")) or _no_conversations(home)


def _no_conversations(home: Path) -> bool:
    import sqlite3

    for path in home.glob("**/*.sqlite"):
        with sqlite3.connect(path) as db:
            if db.execute("SELECT count(*) FROM conversations").fetchone()[0]:
                return False
    return True


def processes_with(value: str) -> set[int]:
    """The pids of processes whose environment holds `value` (this test's BASTION_HOME)."""
    found = set()
    needle = value.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read():
                    found.add(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_an_app_whose_terminal_closes_ends_with_its_harness_process(tmp_path, server):  # noqa: F811
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = environment(tmp_path, server)
    tmux = Tmux(tmp_path)
    try:
        tmux.start([bastion_bin(), "--model", "openai/test"], env, cwd)
        tmux.wait_for(lambda s: "openai/test" in s and "idle" in s, "the app to start")
        running = {  # (the loopback server has this home in its environment too)
            pid for pid in processes_with(f"BASTION_HOME={env['BASTION_HOME']}\0")
            if "runtime.testing.server" not in _cmdline(pid)
        }  # fmt: skip
        assert len(running) >= 3  # the shell, the app, its harness process
    finally:
        tmux.kill()  # the pane goes: SIGHUP to what runs in it
    start = time.monotonic()
    while running & processes_with(f"BASTION_HOME={env['BASTION_HOME']}\0"):
        left = running & processes_with(f"BASTION_HOME={env['BASTION_HOME']}\0")
        assert time.monotonic() - start < 10, [_cmdline(p) for p in left]
        time.sleep(0.05)  # (polling for the processes to go: the thing under test)
    print(f"gone {time.monotonic() - start:.2f} s after the terminal closed")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid} (gone)"
