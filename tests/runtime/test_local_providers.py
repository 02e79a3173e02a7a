"""ollama/ and llamacpp/ by name, openai-responses/ resolution, and a refused connection to a
local server: one retry, then an error saying what to start (remote servers keep the policy)."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from runtime import Harness
from runtime.model.events import AttemptReset
from runtime.model.llm import Message, ModelRequest, ProviderError
from runtime.providers.httpbase import Redactor, transport_error
from runtime.providers.openai import OpenAIChatProvider
from runtime.providers.registry import ProviderSettings, resolve_model
from runtime.providers.responses import ResponsesProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config, model_resolver
from runtime.testing.server import LoopbackServer


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def resolved(spec: str, env: dict[str, str], **kwargs: Any) -> tuple[Any, str]:
    provider, model = resolve_model(spec, env=env, **kwargs)
    await provider.aclose()
    return provider, model


async def test_llamacpp_default_and_override() -> None:
    provider, model = await resolved("llamacpp/qwen2.5-coder", {})
    assert isinstance(provider, OpenAIChatProvider)
    assert (provider.name, provider.base_url, model) == (
        "llamacpp", "http://127.0.0.1:8080/v1", "qwen2.5-coder",
    )  # fmt: skip
    settings = {"llamacpp": ProviderSettings(base_url="http://127.0.0.1:9999/v1/")}
    provider, _ = await resolved("llamacpp/m", {}, providers=settings)
    assert provider.base_url == "http://127.0.0.1:9999/v1"


async def test_ollama_default_and_config_override() -> None:
    provider, model = await resolved("ollama/llama3.2", {})
    assert (provider.base_url, model) == ("http://127.0.0.1:11434/v1", "llama3.2")
    config = Config(providers={"ollama": {"base_url": "http://127.0.0.1:1234/v1"}})
    provider, _ = model_resolver(config, env={})("ollama/llama3.2")
    await provider.aclose()
    assert provider.base_url == "http://127.0.0.1:1234/v1"


async def test_openai_responses_resolves() -> None:
    provider, model = await resolved("openai-responses/gpt-5", {"OPENAI_API_KEY": "sk-x" * 5})
    assert isinstance(provider, ResponsesProvider)
    assert (provider.base_url, model) == ("https://api.openai.com/v1", "gpt-5")
    provider, _ = await resolved(
        "openai-responses/m", {"OPENAI_BASE_URL": "http://127.0.0.1:5/v1"}
    )  # a loopback server needs no key
    assert provider.base_url == "http://127.0.0.1:5/v1"


@pytest.mark.parametrize(
    ("prefix", "hint"),
    [
        ("ollama", "is Ollama running? Start it with `ollama serve`"),
        ("llamacpp", "Start it with `llama-server -m MODEL.gguf`"),
        ("local", "is the local server running?"),
    ],
)
async def test_refused_local_connection_says_what_to_start(prefix: str, hint: str) -> None:
    port = free_port()
    settings = {prefix: ProviderSettings(base_url=f"http://127.0.0.1:{port}/v1")}
    provider, model = resolve_model(f"{prefix}/m", env={}, providers=settings)
    try:
        with pytest.raises(ProviderError) as caught:
            async for _ in provider.stream(ModelRequest(model, (Message("user", "hi"),))):
                pass
    finally:
        await provider.aclose()
    error = caught.value
    assert error.code == "connect_error" and error.retryable and error.retry_limit == 1
    assert hint in error.message and f"127.0.0.1:{port}" in error.message


async def run_once(tmp_path, spec: str, settings: dict[str, ProviderSettings]):
    harness = await Harness.open(
        tmp_path / "bastion.sqlite",
        resolve_model=lambda s: resolve_model(s, env={}, providers=settings),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
    )
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
        sub = harness.subscribe(conv.id)
        await harness.drive(conv.id)
        item = await harness.submit(conv.id, "hi")
        run = await harness.wait(item.id, conv.id)
        events = sub.pending()
        sub.close()
    finally:
        await harness.close()
    return run, [e for e in events if isinstance(e, AttemptReset)]


async def test_refused_ollama_fails_after_exactly_one_retry(tmp_path) -> None:
    settings = {"ollama": ProviderSettings(base_url=f"http://127.0.0.1:{free_port()}/v1")}
    run, resets = await run_once(tmp_path, "ollama/llama3.2", settings)
    assert run.state == "failed"
    assert len(resets) == 1 and resets[0].reason == "cannot connect"
    assert run.error is not None and "`ollama serve`" in run.error["message"]


def test_a_refused_remote_server_keeps_the_retry_policy() -> None:
    request = httpx.Request("POST", "https://api.example.com/v1/chat/completions")
    refused = httpx.ConnectError("[Errno 111] Connection refused", request=request)
    error = transport_error("openai", str(request.url), refused, redact=Redactor())
    assert error.code == "connect_error" and error.retryable and error.retry_limit is None
    assert "running?" not in error.message


async def test_a_local_server_that_answers_keeps_the_retry_policy(tmp_path) -> None:
    """503 four times and then an answer: not a refusal, so the usual retries apply
    (the one-retry limit is only for nothing listening on loopback)."""
    turns = [{"fault": {"status": 503}}] * 4 + [{"text": "finally"}]
    async with LoopbackServer(turns) as server:
        settings = {"llamacpp": ProviderSettings(base_url=server.base_url)}
        run, resets = await run_once(tmp_path, "llamacpp/m", settings)
    assert run.state == "completed" and len(resets) == 4
