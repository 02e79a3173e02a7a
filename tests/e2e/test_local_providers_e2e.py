"""The real `bastion -p` with llamacpp/ and openai-responses/ models."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_llamacpp_not_running_fails_after_one_retry_saying_what_to_start(bastion):
    b = bastion()
    config = b.home.parent / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config.write_text(f'[providers.llamacpp]\nbase_url = "http://127.0.0.1:{port}/v1"\n')
    out = b.run("-p", "hi", "--model", "llamacpp/qwen", timeout=60)
    assert out.returncode == 1, out.stderr
    assert out.stderr.count("retrying the model request") == 1, out.stderr
    assert "llama-server -m MODEL.gguf" in out.stderr
    assert f"127.0.0.1:{port}" in out.stderr


def test_openai_responses_answers_through_the_loopback_server(loopback, bastion):
    server = loopback(
        [{"text": "responses answer", "usage": {"prompt_tokens": 9, "completion_tokens": 2}}]
    )
    result = bastion(server).json(
        "-p", "hi", "--model", "openai-responses/test-model", "--output-format", "json"
    )
    assert result["status"] == "completed" and result["result"] == "responses answer"
    assert result["usage"]["input_tokens"] == 9 and result["usage"]["output_tokens"] == 2
    (body,) = server.requests()
    assert body["model"] == "test-model" and body["store"] is False
    assert body["input"][-1] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
