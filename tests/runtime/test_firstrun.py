"""First run: which local servers answer, and when a session counts as having no model."""

from __future__ import annotations

import argparse
import socket
import time

import pytest

from runtime.config.trust import TrustState, set_trust
from runtime.setup.firstrun import (
    NoModelConfigured,
    ProbeTarget,
    default_targets,
    first_run_report,
    first_run_text,
    probe_local_servers,
)
from runtime.setup.load import load_config
from runtime.testing.server import LoopbackServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_probe_finds_ollama_and_llamacpp_and_skips_what_does_not_answer() -> None:
    with LoopbackServer() as ollama, LoopbackServer() as llamacpp:
        targets = [
            ProbeTarget("Ollama", ollama.url, "ollama"),
            ProbeTarget("llama.cpp", llamacpp.url, "openai"),
            ProbeTarget("llama.cpp", f"http://127.0.0.1:{closed_port()}", "openai"),
        ]
        found = await probe_local_servers(targets, timeout=5)  # (a loaded machine)
    assert [(s.target, s.models) for s in found] == [
        (targets[0], ("loopback:latest",)),
        (targets[1], ("loopback",)),
    ]
    assert found[0].commands() == ["bastion --model ollama/loopback:latest"]
    assert found[1].commands() == [
        f"OPENAI_BASE_URL={llamacpp.url}/v1 bastion --model openai/loopback"
    ]


async def test_a_server_that_never_answers_costs_one_timeout_for_all() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        targets = [
            ProbeTarget(f"silent {i}", f"http://127.0.0.1:{port}", "ollama") for i in range(4)
        ]
        started = time.monotonic()
        assert await probe_local_servers(targets, timeout=1.0) == []
        # Asked at once (about 1 s), not one after another (4 s): a bound with room for load.
        assert time.monotonic() - started < 3.5


def test_default_targets_follow_ollama_host_and_the_llamacpp_variable() -> None:
    assert [t.url for t in default_targets({})] == [
        "http://127.0.0.1:11434/api/tags",
        "http://127.0.0.1:8080/v1/models",
    ]
    env = {"OLLAMA_HOST": "10.0.0.5:11434", "BASTION_LLAMACPP_URL": "http://127.0.0.1:9999"}
    assert [t.url for t in default_targets(env)] == [
        "http://10.0.0.5:11434/api/tags",
        "http://127.0.0.1:9999/v1/models",
    ]


def test_the_text_names_flags_variables_and_config_keys() -> None:
    text = first_run_text([], "/home/u/.config/bastion/config.toml", probing=["Ollama at X"])
    for needle in (
        "--model PROVIDER/NAME",
        "BASTION_MODEL",
        'model = "PROVIDER/NAME"       in /home/u/.config/bastion/config.toml',
        ".bastion/config.toml",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OLLAMA_HOST",
        "[providers.NAME]",
        "Local servers: none answered (Ollama at X).",
    ):
        assert needle in text
    assert "asking Ollama at X" in first_run_text(None, "c", probing=["Ollama at X"])


async def test_first_run_report_probes_then_lists() -> None:
    with LoopbackServer() as ollama:
        report = await first_run_report(
            [ProbeTarget("Ollama", ollama.url, "ollama")],
            env={"XDG_CONFIG_HOME": "/cfg"},
            timeout=5,
        )
    assert "in /cfg/bastion/config.toml" in report
    assert f"Ollama at {ollama.url}: loopback:latest" in report
    assert "    bastion --model ollama/loopback:latest" in report


def test_model_set_says_whether_anything_chose_a_model(tmp_path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert not load_config(str(tmp_path), env).model_set
    assert load_config(str(tmp_path), env | {"BASTION_MODEL": "ollama/x"}).model_set
    (tmp_path / ".bastion").mkdir()
    (tmp_path / ".bastion" / "config.toml").write_text('model = "ollama/y"\n')
    assert not load_config(str(tmp_path), env).model_set  # an untrusted project's: ignored
    set_trust(tmp_path, TrustState.TRUSTED, env)
    assert load_config(str(tmp_path), env).model_set


def _opts(**changes: object) -> argparse.Namespace:
    base = dict(
        prompt="hi",
        model=None,
        approval_mode=None,
        session_id=None,
        continue_=False,
        resume=None,
        request_key=None,
    )
    return argparse.Namespace(**(base | changes))


@pytest.fixture
def bare_env(tmp_path, monkeypatch):
    """No key, no model anywhere: a first run."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BASTION_MODEL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BASTION_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.chdir(tmp_path)


async def test_open_session_without_any_model_is_a_first_run(bare_env, tmp_path) -> None:
    from runtime.model.errors import ConfigError
    from tui.session import open_session

    with pytest.raises(NoModelConfigured) as caught:
        await open_session(_opts())
    assert "OPENAI_API_KEY is not set" in str(caught.value)
    # A model chosen on purpose that cannot be used is its own error, not a first run.
    with pytest.raises(ConfigError) as chosen:
        await open_session(_opts(model="openai/gpt-4.1"))
    assert not isinstance(chosen.value, NoModelConfigured)
    session = await open_session(_opts(model="ollama/llama3.2"))  # needs no key
    try:
        assert session.model == "ollama/llama3.2"
    finally:
        await session.harness.close()
