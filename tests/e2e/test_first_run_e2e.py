"""First run end to end: no model configured, a loopback server standing in as Ollama."""

from __future__ import annotations

import argparse
import socket

import pytest

from runtime.testing.server import LoopbackServer

pytestmark = pytest.mark.e2e


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_print_mode_says_how_to_set_a_model_and_lists_ollama(loopback, bastion):
    server = loopback([])
    b = bastion()
    del b.env["BASTION_MODEL"]
    b.env["OLLAMA_HOST"] = f"127.0.0.1:{server.port}"
    b.env["BASTION_LLAMACPP_URL"] = f"http://127.0.0.1:{closed_port()}"
    out = b.run("-p", "hello")
    assert out.returncode == 2
    assert out.stdout == ""
    err = out.stderr
    assert err.startswith("bastion: No model is configured.")
    assert "--model PROVIDER/NAME" in err and "BASTION_MODEL" in err
    assert f"in {b.env['XDG_CONFIG_HOME']}/bastion/config.toml" in err
    assert f"Ollama at http://127.0.0.1:{server.port}: loopback:latest" in err
    assert "bastion --model ollama/loopback:latest" in err
    assert "llama.cpp at" not in err.split("answered:")[1]  # it did not answer
    assert server.requests() == []  # asked for its models only, never a chat


def test_plain_mode_gives_the_same_message(tmp_path, monkeypatch, capsys):
    from tui import plain

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BASTION_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.chdir(tmp_path)
    with LoopbackServer() as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        monkeypatch.setenv("BASTION_LLAMACPP_URL", f"http://127.0.0.1:{closed_port()}")
        opts = argparse.Namespace(
            prompt=None,
            model=None,
            approval_mode=None,
            session_id=None,
            continue_=False,
            resume=None,
            plain=True,
            request_key=None,
        )
        assert plain.run(opts) == 2
    err = capsys.readouterr().err
    assert err.startswith("bastion: No model is configured.")
    assert f"Ollama at {server.url}: loopback:latest" in err
    assert "none answered" not in err
