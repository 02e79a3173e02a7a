"""`bastion -p --allow PREFIX`: commands starting with PREFIX run without asking, for that
invocation only; anything else that would ask is still refused."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_allow_runs_matching_commands_only(loopback, bastion):
    server = loopback(
        [
            call("c1", "run_command", command="echo allowed > /dev/null && touch one.txt"),
            call("c2", "run_command", command="touch two.txt"),
            call("c3", "run_command", command="touchx three.txt; touch four.txt"),
            {"text": "done"},
        ]
    )
    b = bastion(server)
    out = b.run("-p", "go", "--allow", "echo allowed", "--allow", "touch one.txt")
    assert out.returncode == 3, out.stderr  # two calls were refused
    assert (b.cwd / "one.txt").exists()
    assert not (b.cwd / "two.txt").exists() and not (b.cwd / "four.txt").exists()
    results = tool_messages(server.requests()[3])
    assert "REFUSED" not in results[0]["content"]
    assert "REFUSED FORBIDDEN" in results[1]["content"]
    assert "REFUSED FORBIDDEN" in results[2]["content"]
    # The flag holds for its own invocation: nothing was remembered.
    again = loopback([call("c1", "run_command", command="touch one.txt"), {"text": "ok"}])
    (b.cwd / "one.txt").unlink()
    out = bastion(again).run("-p", "-c", "go")
    assert out.returncode == 3, out.stderr  # refused again
    assert not (b.cwd / "one.txt").exists()


def test_a_bad_allow_is_a_usage_error(loopback, bastion):
    server = loopback([{"text": "never"}])
    out = bastion(server).run("-p", "go", "--allow", "git status && rm -rf /")
    assert out.returncode == 2
    assert "not a plain command prefix" in out.stderr
    assert server.requests() == []
