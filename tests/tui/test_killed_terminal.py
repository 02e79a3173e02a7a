"""`kill -9` of the app leaves the terminal usable: the harness process, which sees the
app's end of their socket close without a close, sets the terminal back as it was
before the app started (cooked, echoing, the normal screen, no mouse reporting)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time

import pytest

from tests.tui.test_tmux import bastion_bin, environment, server, tmux, wait_exit  # noqa: F401
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux


def stty(tty: str) -> list[str]:
    out = subprocess.run(["stty", "-a", "-F", tty], capture_output=True, text=True, timeout=10)
    return out.stdout.replace(";", " ").split()


def app_pid(tmux) -> int:  # noqa: F811
    """The `bastion` process in the pane (under its shells)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True)
    rows = [line.split(None, 2) for line in out.stdout.splitlines()]
    parents = {tmux.tmux("display", "-p", "-t", "bastion", "#{pane_pid}").strip()}
    for _ in range(4):  # run.sh, sh -c, bastion
        for pid, ppid, args in rows:
            if ppid in parents:
                words = args.split()
                if words[0] != "sh" and any(w.endswith("/bin/bastion") for w in words[:2]):
                    return int(pid)
                parents.add(pid)
    raise AssertionError("no bastion process in the pane")


@pytest.mark.parametrize("when", ["opening", "answered"])
def test_kill_9_of_the_app_leaves_the_terminal_as_it_was(tmp_path, tmux, server, when):  # noqa: F811
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = environment(tmp_path, server)
    done = tmp_path / "app-exit"
    shell = f"{shlex.quote(bastion_bin())} --model openai/test; echo $? > {done}; sleep 60"
    tmux.start(["sh", "-c", shell], env, cwd)  # the shell stays: the terminal is still there
    tmux.wait_for(lambda s: "type a request" in s, "the app to start")
    tty = tmux.tmux("display", "-p", "-t", "bastion", "#{pane_tty}").strip()
    assert "-icanon" in stty(tty) and "-echo" in stty(tty)  # raw while the app runs
    if when == "answered":  # the session open and served, not only drawn
        tmux.send("say hello", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "Hello from the loopback model." in s, "the answer")
    os.kill(app_pid(tmux), signal.SIGKILL)
    assert wait_exit(done) == 128 + signal.SIGKILL
    deadline = time.monotonic() + 10
    while (
        "-icanon" in stty(tty)
        or tmux.tmux("display", "-p", "-t", "bastion", "#{alternate_on}").strip() != "0"
    ):
        if time.monotonic() > deadline:
            log = tmp_path / "home" / "harness.log"
            said = log.read_text()[-3000:] if log.exists() else "(no harness log)"
            children = subprocess.run(["pgrep", "-af", "tui.child"], capture_output=True)
            pytest.fail(
                f"the terminal was left raw: {stty(tty)}\nharness log: {said}\n"
                f"harness processes: {children.stdout.decode()}"
            )
        time.sleep(0.1)  # (poll interval)
    settings = stty(tty)
    assert "icanon" in settings and "echo" in settings
    assert tmux.tmux("display", "-p", "-t", "bastion", "#{mouse_any_flag}").strip() == "0"
