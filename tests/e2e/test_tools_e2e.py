"""The coding tools through the real command: the model's tool calls land in the workspace
only when the approval mode allows, and the model is told why when they do not."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_full_auto_writes_then_edits_a_file(loopback, bastion):
    server = loopback(
        [
            call("c1", "write_file", path="src/hello.py", content="print('hello')\n"),
            call("c2", "edit_file", path="src/hello.py", old_text="hello", new_text="bastion"),
            call("c3", "read_file", path="src/hello.py"),
            {"text": "Wrote and edited src/hello.py."},
        ]
    )
    b = bastion(server)
    out = b.run("-p", "make a hello script", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Wrote and edited src/hello.py.\n"
    assert (b.cwd / "src" / "hello.py").read_text() == "print('bastion')\n"
    requests = server.requests()
    tools_offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"read_file", "write_file", "edit_file", "run_command", "search_files"} <= tools_offered
    results = tool_messages(requests[3])
    assert [r["tool_call_id"] for r in results] == ["c1", "c2", "c3"]
    assert (
        "-print('hello')" in results[1]["content"] and "+print('bastion')" in results[1]["content"]
    )
    assert "print('bastion')" in results[2]["content"]
    assert "· write_file" in out.stderr and "· edit_file" in out.stderr


def test_default_print_mode_refuses_a_write_and_tells_the_model(loopback, bastion):
    server = loopback(
        [
            call("c1", "write_file", path="notes.txt", content="x"),
            {"text": "I was not allowed to write notes.txt."},
        ]
    )
    b = bastion(server)
    out = b.run("-p", "write notes")
    assert out.returncode == 3, out.stderr  # completed, but a call it needed was refused
    assert not (b.cwd / "notes.txt").exists()
    told = tool_messages(server.requests()[1])[0]["content"]
    assert "REFUSED FORBIDDEN" in told and "--approval-mode" in told
    assert "refused write_file" in out.stderr
    exported = json.loads(
        b.run("export", json.loads(b.run("sessions", "--json").stdout)[0]["id"]).stdout
    )
    assert [c["state"] for c in exported["tool_calls"]] == ["denied"]


def test_auto_edit_runs_edits_but_refuses_commands(loopback, bastion):
    server = loopback(
        [
            call("c1", "write_file", path="a.txt", content="a\n"),
            call("c2", "run_command", command="touch ran.txt"),
            {"text": "done"},
        ]
    )
    b = bastion(server)
    out = b.run("-p", "go", "--approval-mode", "auto-edit")
    assert out.returncode == 3, out.stderr  # the command was refused
    assert (b.cwd / "a.txt").exists() and not (b.cwd / "ran.txt").exists()
    assert "refused 1 tool call" in out.stderr and "--allow 'touch ran.txt'" in out.stderr


def test_paths_outside_the_workspace_are_refused_even_in_full_auto(loopback, bastion, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    server = loopback(
        [
            call("c1", "read_file", path="../secret.txt"),
            call("c2", "write_file", path=str(secret), content="pwned", overwrite=True),
            {"text": "could not"},
        ]
    )
    b = bastion(server)
    (b.cwd / "link").symlink_to(tmp_path)
    out = b.run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert secret.read_text() == "top secret"
    results = tool_messages(server.requests()[2])
    assert all("REFUSED" in r["content"] for r in results)
    assert "top secret" not in json.dumps(server.requests())


def test_run_command_output_reaches_the_model(loopback, bastion):
    server = loopback(
        [
            call("c1", "run_command", command="echo out-$((6*7)); echo err >&2; exit 3"),
            {"text": "ran it"},
        ]
    )
    b = bastion(server)
    out = b.run("-p", "go", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    told = tool_messages(server.requests()[1])[0]["content"]
    assert "out-42" in told and "err" in told and "3" in told


def test_anthropic_messages_provider_round_trip(loopback, bastion):
    """The same loop over the Anthropic Messages wire format (tool_use / tool_result)."""
    server = loopback([
        call("toolu_1", "write_file", path="a.md", content="# hi\n"),
        {"text": "Wrote a.md."},
    ])  # fmt: skip
    b = bastion(None)
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.port}", "BASTION_MODEL": ""}
    out = b.run("-p", "write", "--model", "anthropic/claude-test",
                "--approval-mode", "full-auto", env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Wrote a.md.\n" and (b.cwd / "a.md").read_text() == "# hi\n"
    second = server.requests()[1]
    assert second["model"] == "claude-test"
    results = [
        block
        for message in second["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["toolu_1"]
