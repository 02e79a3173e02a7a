"""The loopback server: wire format, turn selection, recording, speed, and the process form."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.model.llm import Message, ModelRequest, TextChunk
from runtime.providers.openai import OpenAIChatProvider
from runtime.providers.sse import parse_sse
from runtime.testing.server import LoopbackServer
from runtime.testing.turns import LoopbackTurn

ROOT = Path(__file__).resolve().parents[2]


def chat(
    client: httpx.Client, base: str, text: str = "hi", *, usage: bool = True, stream: bool = True
) -> httpx.Response:
    body: dict[str, Any] = {
        "model": "loop-model",
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    return client.post(f"{base}/chat/completions", json=body)


def events(response: httpx.Response) -> list[str]:
    return [e.data for e in parse_sse(response.content)]


def test_wire_format_is_openai_chat_completion_chunks() -> None:
    turn = {
        "text": "Hello there",
        "chunk_size": 5,
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    with LoopbackServer([turn]) as server, httpx.Client() as client:
        response = chat(client, server.base_url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    data = events(response)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "loop-model"
        assert chunk["id"] == chunks[0]["id"] and isinstance(chunk["created"], int)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert contents == ["Hello", " ther", "e"]
    assert chunks[-2]["choices"] == [
        {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    ]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_no_usage_chunk_unless_asked() -> None:
    with LoopbackServer([{"text": "x"}]) as server, httpx.Client() as client:
        data = events(chat(client, server.base_url, usage=False))
    assert all("usage" not in json.loads(d) for d in data[:-1])


def test_tool_call_chunks() -> None:
    turn = {"tool_calls": [{"id": "call_1", "name": "write_file", "arguments": {"path": "a"}}]}
    with LoopbackServer([turn]) as server, httpx.Client() as client:
        chunks = [json.loads(d) for d in events(chat(client, server.base_url))[:-1]]
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert calls[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_file", "arguments": ""},
    }
    assert "".join(c["function"]["arguments"] for c in calls) == '{"path": "a"}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_match_picks_turns_out_of_order() -> None:
    turns = [
        {"text": "for beta", "match": "beta"},
        {"text": "anything"},
        {"text": "for alpha", "match": "alpha"},
    ]
    with LoopbackServer(turns) as server, httpx.Client() as client:
        answers = []
        for prompt in ("say alpha", "say beta", "say gamma"):
            chunks = [json.loads(d) for d in events(chat(client, server.base_url, prompt))[:-1]]
            answers.append(
                "".join(
                    c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
                )
            )
        assert answers == ["for alpha", "for beta", "anything"]
        assert server.remaining == 0
        assert [r.body["messages"][0]["content"] for r in server.requests] == [
            "say alpha",
            "say beta",
            "say gamma",
        ]


def test_exhausted_script_answers_400() -> None:
    with LoopbackServer([]) as server, httpx.Client() as client:
        response = chat(client, server.base_url)
    assert response.status_code == 400
    assert "loopback script exhausted" in response.json()["error"]["message"]


def test_models_endpoint_and_unknown_route() -> None:
    with LoopbackServer() as server, httpx.Client() as client:
        models = client.get(f"{server.base_url}/models")
        missing = client.get(f"{server.base_url}/nope")
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "loopback"
    assert missing.status_code == 404


def test_non_streamed_request_gets_a_whole_completion() -> None:
    with LoopbackServer([{"text": "whole"}]) as server, httpx.Client() as client:
        response = chat(client, server.base_url, stream=False)
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "whole"


def test_fault_status_headers_and_body() -> None:
    turns = [
        {"fault": {"status": 429, "retry_after": 3, "body": {"error": {"message": "slow down"}}}}
    ]
    with LoopbackServer(turns) as server, httpx.Client() as client:
        response = chat(client, server.base_url)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json() == {"error": {"message": "slow down"}}


def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    with LoopbackServer([{"text": "a"}, {"text": "b"}, {"text": "c"}]) as server:
        with httpx.Client() as client:
            for _ in range(3):
                assert chat(client, server.base_url).status_code == 200
        assert len(server.requests) == 3


def test_add_turns_while_running() -> None:
    with LoopbackServer() as server, httpx.Client() as client:
        server.add_turns({"text": "late"}, LoopbackTurn(text="later"))
        assert server.remaining == 2
        assert chat(client, server.base_url).status_code == 200
        assert server.remaining == 1


def test_turn_validation() -> None:
    with pytest.raises(ValueError, match="unknown turn fields"):
        LoopbackTurn.from_dict({"txt": "typo"})
    with pytest.raises(ValueError, match="unknown fault fields"):
        LoopbackTurn.from_dict({"fault": {"stauts": 500}})


def test_200_kb_in_4_char_chunks_streams_fast() -> None:
    text = "abcd" * 50_000
    with LoopbackServer([{"text": text, "chunk_size": 4}]) as server, httpx.Client() as client:
        started = (
            time.process_time()
        )  # CPU time (server thread and client): load does not stretch it
        with client.stream(
            "POST",
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": [], "stream": True},
        ) as response:
            size = sum(len(chunk) for chunk in response.iter_raw())
        elapsed = time.process_time() - started
    assert size > 200_000 * 10  # about 50,000 events of real chunk JSON
    assert elapsed < 1.0, f"took {elapsed:.2f}s"


async def test_in_process_server_from_an_async_test() -> None:
    async with LoopbackServer([{"text": "async ok"}]) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        try:
            items = [i async for i in provider.stream(ModelRequest("m", (Message("user", "q"),)))]
        finally:
            await provider.aclose()
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "async ok"


def test_in_process_server_serves_another_process() -> None:
    with LoopbackServer([{"text": "from a child", "chunk_size": 100}]) as server:
        code = (
            "import httpx, sys\n"
            "body = {'model': 'm', 'messages': [], 'stream': True}\n"
            "r = httpx.post(sys.argv[1] + '/chat/completions', json=body)\n"
            "print(r.status_code, 'child' in r.text)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code, server.base_url],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200", "True"]
    assert len(server.requests) == 1


# --- as a process ---------------------------------------------------------------------


def start_process(tmp_path: Path, turns: list[dict[str, Any]]) -> tuple[subprocess.Popen[str], str]:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps(turns))
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runtime.testing.server",
            "--script",
            str(script),
            "--port-file",
            str(port_file),
            "--record",
            str(tmp_path / "requests.jsonl"),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not port_file.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the server never wrote its port"
        time.sleep(0.02)  # (poll interval)
    port = int(port_file.read_text())
    return process, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_process_with_port_file_and_record(tmp_path: Path, stop: signal.Signals) -> None:
    turns = [{"fault": {"status": 500}}, {"text": "second time lucky", "chunk_size": 3}]
    process, base_url = start_process(tmp_path, turns)
    try:
        provider = OpenAIChatProvider("openai", base_url)
        request = ModelRequest("m", (Message("user", "try twice"),))
        try:
            with pytest.raises(Exception, match="HTTP 500"):
                [i async for i in provider.stream(request)]
            items = [i async for i in provider.stream(request)]
        finally:
            await provider.aclose()
        assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "second time lucky"
        lines = (tmp_path / "requests.jsonl").read_text().splitlines()
        assert len(lines) == 2
        assert json.loads(lines[1])["messages"] == [{"role": "user", "content": "try twice"}]
        process.send_signal(stop)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_process_refuses_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text('[{"txt": "typo"}]')
    result = subprocess.run(
        [sys.executable, "-m", "runtime.testing.server", "--script", str(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "unknown turn fields" in result.stderr


def test_in_process_record_file(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    with LoopbackServer([{"text": "a"}], record=record) as server, httpx.Client() as client:
        chat(client, server.base_url, "recorded prompt")
    line = json.loads(record.read_text().splitlines()[0])
    assert line["messages"] == [{"role": "user", "content": "recorded prompt"}]


def test_a_garbled_request_does_not_take_the_server_down() -> None:
    with LoopbackServer([{"text": "still here"}]) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: nope\r\n\r\n")
            assert sock.recv(100) == b""  # dropped
        with httpx.Client() as client:
            assert chat(client, server.base_url).status_code == 200
