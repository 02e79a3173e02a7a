"""MCP servers through the real command: the model is offered a server's tools with
their schemas, calls them in a turn scripted by the loopback provider, and every
failure of a server is one line while the session goes on."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.mcp.conftest import call, stdio_server, tool_messages, write_config

pytestmark = pytest.mark.e2e
SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d31"


def offered(request: dict) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in request["tools"]}


def test_a_stdio_servers_tools_are_offered_and_called_in_a_turn(loopback, bastion, tmp_path):
    server = loopback([call("c1", "t__echo", text="hi"), {"text": "done"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server(env={"SECRET_FOR_T": "s3"})})
    out = b.run("-p", "echo hi", "--allow", "t__echo")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    first, second = server.requests()
    tools = offered(first)
    assert {"read_file", "run_command", "t__echo", "t__slow", "t__image"} <= set(tools)
    schema = tools["t__echo"]["parameters"]  # the server's JSON schema, passed through
    assert schema["properties"]["text"]["type"] == "string" and schema["required"] == ["text"]
    assert tool_messages(second)[0]["content"] == "echo: hi"


def test_env_from_the_users_config_reaches_the_server(loopback, bastion, tmp_path):
    server = loopback([call("c1", "t__env", name="SECRET_FOR_T"), {"text": "ok"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server(env={"SECRET_FOR_T": "s3"})})
    out = b.run("-p", "go", "--allow", "t__*")
    assert out.returncode == 0, out.stderr
    assert tool_messages(server.requests()[1])[0]["content"] == "s3"


def test_an_http_server_on_loopback(loopback, bastion, tmp_path, http_server):
    server = loopback([call("c1", "web__echo", text="over http"), {"text": "done"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"web": {"url": http_server, "headers": {"X-Test": "1"}}})
    out = b.run("-p", "go", "--allow", "web__*")
    assert out.returncode == 0, out.stderr
    assert "web__echo" in offered(server.requests()[0])
    assert tool_messages(server.requests()[1])[0]["content"] == "echo: over http"


def test_print_mode_cannot_ask_so_an_mcp_call_is_refused(loopback, bastion, tmp_path):
    server = loopback([call("c1", "t__echo", text="hi"), {"text": "refused"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    out = b.run("-p", "go", "--approval-mode", "auto-edit")  # MCP tools ask by default
    assert out.returncode == 3, out.stderr
    told = tool_messages(server.requests()[1])[0]["content"]
    assert told.startswith("REFUSED FORBIDDEN") and "t__echo" in told
    assert "--allow t__echo (that MCP tool; t__* for all of t's)" in out.stderr
    assert "--approval-mode auto-edit" not in out.stderr  # it would not allow an MCP tool


def test_an_image_comes_back_as_an_image(loopback, bastion, tmp_path):
    server = loopback([call("c1", "t__image"), {"text": "a red box"}])
    b = bastion(server)
    takes_images = '[models."openai/test-model"]\nimages = true\n'
    write_config(tmp_path / "config", {"t": stdio_server()}, extra=takes_images)
    out = b.run("-p", "look", "--allow", "t__image")
    assert out.returncode == 0, out.stderr
    second = server.requests()[1]
    images = [
        part
        for m in second["messages"]
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert len(images) == 1 and images[0]["image_url"]["url"].startswith("data:image/")


def test_a_long_result_is_spilled_and_paged_with_read_output(loopback, bastion, tmp_path):
    server = loopback([call("c1", "t__big", size=200_000), {"text": "long"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    out = b.run("-p", "go", "--allow", "t__big")
    assert out.returncode == 0, out.stderr
    told = tool_messages(server.requests()[1])[0]["content"]
    assert len(told) < 40_000 and "bytes omitted" in told and "line 0000001" in told
    output_id = told.rsplit('read_output {"id": "', 1)[1].split('"')[0]
    server2 = loopback(
        [call("c2", "read_output", id=output_id, offset=3000, limit=2), {"text": "ok"}]
    )
    b.env["OPENAI_BASE_URL"] = server2.base_url
    sid = json.loads(b.run("sessions", "--json").stdout)[0]["id"]
    out = b.run("-p", "--resume", sid, "page it")
    assert out.returncode == 0, out.stderr
    paged = tool_messages(server2.requests()[1])[-1]["content"]
    assert "line 0003000" in paged and "line 0003001" in paged


def test_a_server_crashing_mid_call_is_one_line_and_the_session_goes_on(
    loopback, bastion, tmp_path
):
    server = loopback(
        [call("c1", "t__crash"), call("c2", "t__echo", text="again"), {"text": "carried on"}]
    )
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server(restart=False)})
    out = b.run("-p", "go", "--allow", "t__*")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "carried on\n"
    first, second = tool_messages(server.requests()[2])
    assert "REFUSED UNAVAILABLE" in first["content"] and "crashing on purpose" in first["content"]
    assert "REFUSED UNAVAILABLE" in second["content"]  # restart = false: it stays down
    assert "MCP server t is down (stopped mid-call" in second["content"]
    assert "t__echo" not in offered(server.requests()[2])  # its tools are withdrawn
    lines = [line for line in out.stderr.splitlines() if "MCP server t" in line]
    assert len(lines) == 1 and "goes on without it" in lines[0]


def test_a_crashed_server_is_restarted_and_one_line_says_when(loopback, bastion, tmp_path):
    """By default a server that crashes after it was up is started again with backoff
    (tests/mcp/test_mcp_harness.py follows it back): the one line says so."""
    server = loopback([call("c1", "t__crash"), {"text": "carried on"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    out = b.run("-p", "go", "--allow", "t__*")
    assert out.returncode == 0, out.stderr
    (first,) = tool_messages(server.requests()[1])
    assert "REFUSED UNAVAILABLE" in first["content"] and "crashing on purpose" in first["content"]
    lines = [line for line in out.stderr.splitlines() if "MCP server t" in line]
    assert len(lines) == 1, out.stderr
    assert "restarting in 2 s (1 of 5); its tools are withdrawn until it is back" in lines[0]


@pytest.mark.parametrize("how", ["missing", "hangs"])
def test_a_server_that_does_not_start_is_one_line(loopback, bastion, tmp_path, how):
    server = loopback([{"text": "fine without it"}])
    b = bastion(server)
    table = (
        {"command": str(tmp_path / "no-such-server")}
        if how == "missing"
        else stdio_server("--hang", startup_timeout=1)
    )
    write_config(tmp_path / "config", {"t": table})
    out = b.run("-p", "hi")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "fine without it\n"
    lines = [line for line in out.stderr.splitlines() if "MCP server t" in line]
    assert len(lines) == 1, out.stderr
    assert ("did not start within 1 s" if how == "hangs" else "cannot run it") in lines[0]
    assert not any(t.startswith("t__") for t in offered(server.requests()[0]))


def test_sigkill_mid_call_then_resume_reports_unknown_effects_and_never_replays(
    loopback, bastion, tmp_path
):
    marker = tmp_path / "slow-ran"
    server = loopback([call("c1", "t__slow", seconds=60, marker=str(marker)), {"text": "resumed"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    proc = b.popen("-p", "--session-id", SID, "go", "--allow", "t__slow")
    try:
        deadline = time.monotonic() + 120  # the server starts first (seconds when loaded)
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)  # (poll interval)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    marker.unlink()
    out = b.run("-p", "--resume", SID, "--allow", "t__slow")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "resumed\n"
    told = tool_messages(server.requests()[-1])[0]["content"]
    assert told.startswith("INTERRUPTED: t__slow was running when the previous process stopped")
    assert "effects are unknown" in told
    assert not marker.exists()  # not replayed
    exported = json.loads(b.run("export", SID).stdout)
    assert [c["state"] for c in exported["tool_calls"]] == ["interrupted"]


@pytest.mark.parametrize("wire", ["anthropic", "openai-responses"])
def test_the_schema_reaches_every_wire_format_and_the_call_round_trips(
    loopback, bastion, tmp_path, wire
):
    server = loopback([call("toolu_1", "t__echo", text="wired"), {"text": "done"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    env = {"BASTION_MODEL": ""}
    if wire == "anthropic":
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{server.port}"
    out = b.run("-p", "go", "--model", f"{wire}/test-model", "--allow", "t__echo", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    first, second = server.requests()
    if wire == "anthropic":
        tool = next(t for t in first["tools"] if t["name"] == "t__echo")
        schema = tool["input_schema"]
        results = [block for m in second["messages"] if isinstance(m["content"], list)
                   for block in m["content"] if block.get("type") == "tool_result"]  # fmt: skip
        told = json.dumps(results)
    else:
        tool = next(t for t in first["tools"] if t["name"] == "t__echo")
        schema = tool["parameters"]
        told = json.dumps([i for i in second["input"] if i.get("type") == "function_call_output"])
    assert schema["properties"]["text"]["type"] == "string" and schema["required"] == ["text"]
    assert "echo: wired" in told


def user_text(request: dict) -> str:
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


def test_a_resource_mention_is_attached_and_an_unlisted_one_is_not_read(
    loopback, bastion, tmp_path
):
    """`@t:notes://team/guide` attaches what the server lists under that URI; a URI it
    does not list (`..` in it) is left as typed, never asked of the server; a binary
    one is one line on stderr. Print mode, the real command."""
    server = loopback([{"text": "read it"}])
    b = bastion(server)
    write_config(tmp_path / "config", {"t": stdio_server()})
    prompt = (
        "follow @t:notes://team/guide and @t:notes://team/../../etc/passwd and @t:notes://team/logo"
    )
    out = b.run("-p", prompt)
    assert out.returncode == 0, out.stderr
    sent = user_text(server.requests()[0])
    assert sent.startswith(prompt + "\n\n")
    assert (
        '<file path="t:notes://team/guide" length="27">\nGUIDE: tabs, never spaces.\n</file>'
        in sent
    )
    assert "etc/passwd" not in sent.split("\n\n", 1)[1]  # only as typed
    assert (
        '<file path="t:notes://team/logo" note="not attached: t:notes://team/logo is not text'
        in sent
    )
    lines = [line for line in out.stderr.splitlines() if "notes://team/logo" in line]
    assert len(lines) == 1 and "a binary resource is not attached" in lines[0]
