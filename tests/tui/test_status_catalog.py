"""The status line's context window comes from the user's catalog: a [models."…"] table
in config.toml, as `bastion doctor` and the runtime read it, not only the built-in one."""

from __future__ import annotations

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import bastion_bin, environment, tmux, wait_exit  # noqa: F401
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

CONFIG = '[models."openai/bench"]\ncontext_window = 2000000\n'


@pytest.mark.parametrize("size", [(80, 24), (140, 45)])
def test_the_status_line_uses_the_configured_context_window(tmp_path, tmux, size):  # noqa: F811
    with LoopbackThread.start([{"text": "Hello."}], tmp_path / "server") as server:
        env = environment(tmp_path, server)
        config = tmp_path / "config" / "bastion"
        config.mkdir(parents=True)
        (config / "config.toml").write_text(CONFIG)
        cwd = tmp_path / "work"
        cwd.mkdir()
        exit_file = tmux.start([bastion_bin(), "--model", "openai/bench"], env, cwd)
        tmux.tmux("resize-window", "-t", "bastion", "-x", str(size[0]), "-y", str(size[1]))
        tmux.wait_for(lambda s: "openai/bench" in s, "the app to start")
        tmux.send("hi", "Enter")
        screen = tmux.wait_for(lambda s: "Hello." in s and "ctx" in s, "the answer")
        assert "/2.0M" in screen, screen
        assert "/32k" not in screen
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
