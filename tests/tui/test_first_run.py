"""The first-run screen: up at once, then the local servers that answered."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import ProbeTarget
from runtime.testing.server import LoopbackServer
from tests.tui.conftest import wait_for
from tests.tui.test_tmux import TMUX, Tmux, bastion_bin, wait_exit
from tui.widgets.firstrun import FirstRunApp, FirstRunScreen


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_screen_lists_the_server_standing_in_as_ollama(monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/home/you/.config")
    ollama = LoopbackServer()
    ollama.start()
    targets = [
        ProbeTarget("Ollama", ollama.url, "ollama"),
        ProbeTarget("llama.cpp", f"http://127.0.0.1:{closed_port()}", "openai"),
    ]
    app = FirstRunApp(targets, timeout=5)  # (a loaded machine)
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, FirstRunScreen)
            await wait_for(lambda: screen.servers is not None, pilot)
            text = screen.text
            assert 'model = "PROVIDER/NAME"       in /home/you/.config/bastion/config.toml' in text
            assert f"Ollama at {ollama.url}: loopback:latest" in text
            assert "bastion --model ollama/loopback:latest" in text
            assert "llama.cpp at" not in text.split("answered:")[1]
            assert "loopback:latest" in str(screen.query_one("#firstrun-text").render())
            ollama.stop()  # r asks again, and now nothing answers
            await pilot.press("r")
            await wait_for(lambda: screen.servers == [], pilot)
            assert "Local servers: none answered (Ollama at" in screen.text
            await pilot.press("q")
        assert not app.is_running
    finally:
        ollama.stop()


async def test_the_screen_is_up_before_a_slow_server_answers() -> None:
    with socket.socket() as silent:  # accepts, never answers: the probe times out
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        target = ProbeTarget("Ollama", f"http://127.0.0.1:{silent.getsockname()[1]}", "ollama")
        app = FirstRunApp([target])
        async with app.run_test(size=(100, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, FirstRunScreen)
            await pilot.pause(0.05)
            assert screen.servers is None
            assert "Local servers: asking Ollama at" in str(
                screen.query_one("#firstrun-text").render()
            )
            await wait_for(lambda: screen.servers == [], pilot)
            assert "none answered (Ollama at" in screen.text
            await pilot.press("escape")


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path)
    try:
        yield session
    finally:
        session.kill()


@pytest.mark.e2e
@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_bastion_without_a_model_shows_the_screen_and_exits_2(tmp_path, term) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    with LoopbackServer() as ollama:
        env = {
            "PATH": "/usr/bin:/bin",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "BASTION_HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "OLLAMA_HOST": ollama.url,
            "BASTION_LLAMACPP_URL": f"http://127.0.0.1:{closed_port()}",
        }
        exit_file = term.start([bastion_bin()], env, cwd)
        # (wait for the command: a frame drawn mid-layout may show the list a line short)
        screen = term.wait_for(
            lambda s: "bastion --model ollama/loopback:latest" in s, "the first-run screen"
        )
        assert "No model is configured" in screen
        assert f"Ollama at {ollama.url}: loopback:latest" in screen
        term.send("q")
        assert wait_exit(exit_file) == 2


async def test_the_app_shows_the_screen_when_its_session_has_no_model(monkeypatch) -> None:
    """`bastion` draws the app before a new session opens; opening then finds no model."""
    from runtime import NoModelConfigured
    from tui.app import BastionApp

    with LoopbackServer() as ollama:
        monkeypatch.setenv("OLLAMA_HOST", ollama.url)
        monkeypatch.setenv("BASTION_LLAMACPP_URL", f"http://127.0.0.1:{closed_port()}")

        async def opener() -> Any:
            raise NoModelConfigured("no model is configured", hint="OPENAI_API_KEY is not set")

        app = BastionApp(opener=opener)
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_for(lambda: isinstance(app.screen, FirstRunScreen), pilot)
            screen = app.screen
            assert isinstance(screen, FirstRunScreen)
            await wait_for(lambda: screen.servers is not None, pilot)
            assert f"Ollama at {ollama.url}: loopback:latest" in screen.text
            await pilot.press("enter")
        assert app.return_code == 2
        assert isinstance(app.open_error, NoModelConfigured)


@pytest.mark.e2e
@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_q_leaves_the_instructions_on_the_terminal(tmp_path, term) -> None:
    """The full-screen app goes when q is pressed; what it said must not go with it."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    with LoopbackServer() as ollama:
        env = {
            "PATH": "/usr/bin:/bin",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "BASTION_HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "OLLAMA_HOST": ollama.url,
            "BASTION_LLAMACPP_URL": f"http://127.0.0.1:{closed_port()}",
        }
        exit_file = term.start([bastion_bin()], env, cwd)
        term.tmux("set-option", "-t", "bastion", "remain-on-exit", "on")  # keep the pane
        term.wait_for(
            lambda s: "bastion --model ollama/loopback:latest" in s, "the first-run screen"
        )
        term.send("q")
        assert wait_exit(exit_file) == 2
        after = term.tmux("capture-pane", "-p", "-S", "-100", "-t", "bastion")  # with scrollback
    assert "Welcome: choose a model" not in after  # the app itself is gone
    assert "No model is configured" in after, after
    assert "--model PROVIDER/NAME" in after and "BASTION_MODEL" in after
    assert "bastion --model ollama/loopback:latest" in after
