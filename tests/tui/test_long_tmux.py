"""Issue 36 in a real terminal: a 2,000-turn session opened with `bastion -r ID`,
Ctrl+Home shows its first prompt, and a prompt typed after it is sent exactly as
typed (no key lost, none sent to another widget)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import Tmux, bastion_bin, wait_exit

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

BENCH = Path(__file__).parents[1] / "bench"
TURNS = 2000


@pytest.fixture(scope="module")
def long_session(tmp_path_factory) -> tuple[Path, Path, str]:
    """A 2,000-turn session (built with the store's own mutations, as the long-session
    benchmark builds it), once for the module: (home, workspace, id)."""
    sys.path.insert(0, str(BENCH))
    try:
        from long_session import build_session
    finally:
        sys.path.remove(str(BENCH))
    base = tmp_path_factory.mktemp("long")
    home, cwd = base / "home", base / "work"
    home.mkdir()
    cwd.mkdir()
    conv_id = asyncio.run(build_session(home, cwd, TURNS))
    return home, cwd, conv_id


def test_ctrl_home_reaches_the_first_prompt_and_a_typed_prompt_is_sent_exactly(
    tmp_path, long_session
):
    home, cwd, conv_id = long_session
    run_home = tmp_path / "home"
    shutil.copytree(home, run_home)  # (each run its own copy: the lease, the new turn)
    config = run_home / "config" / "bastion"
    config.mkdir(parents=True, exist_ok=True)  # a window the session fits: no compaction
    (config / "config.toml").write_text('[models."openai/bench"]\ncontext_window = 2000000\n')
    with LoopbackThread.start([{"text": "RESUMED ANSWER"}], tmp_path / "server") as server:
        env = {
            "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm-256color",
            "COLORTERM": "truecolor", "LANG": "C.UTF-8", "BASTION_HOME": str(run_home),
            "XDG_CONFIG_HOME": str(run_home / "config"), "OPENAI_API_KEY": "k",
            "OPENAI_BASE_URL": server.base_url,
        }  # fmt: skip
        tmux = Tmux(tmp_path)
        try:
            exit_file = tmux.start([bastion_bin(), "-r", conv_id], env, cwd)
            tmux.wait_for(lambda s: "LAST ANSWER" in s, "the session's end", timeout=60)
            tmux.send("C-Home")
            tmux.wait_for(lambda s: "FIRST QUESTION 0" in s, "the first prompt", timeout=30)
            tmux.send("needle0003/resume", literal=True)
            tmux.send("Enter")
            tmux.wait_for(lambda s: "RESUMED ANSWER" in s, "the answer", timeout=60)
            tmux.send("C-c")
            tmux.send("C-c")
            assert wait_exit(exit_file, timeout=30) == 0
        finally:
            tmux.kill()
        (request,) = server.requests()
    assert request["messages"][-1] == {"role": "user", "content": "needle0003/resume"}
