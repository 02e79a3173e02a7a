"""Issue 37 item 1: a subagent's spend is the session's. `-p`'s JSON reports the whole
session's usage (its `children` too), and `--max-cost` holds a parent whose child
spent past it: the parent stops before its next request."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

PRICED = '[models."openai/test-model"]\ninput_price = 1.0\noutput_price = 2.0\n'


def task_call(prompt: str) -> dict:
    arguments = {"description": "look around", "prompt": prompt}
    return {"tool_calls": [{"id": "t1", "name": "task", "arguments": arguments}]}


def priced(bastion, server):
    b = bastion(server)
    (b.home.parent / "config" / "bastion").mkdir(parents=True)
    (b.home.parent / "config" / "bastion" / "config.toml").write_text(PRICED)
    return b


def test_the_json_counts_the_childs_spend_in_the_sessions(loopback, bastion):
    small = {"prompt_tokens": 1000, "completion_tokens": 10}
    server = loopback([
        {"match": "PARENT", "unless": ["REPORT"], **task_call("CHILD: look"), "usage": small},
        {"match": "CHILD", "text": "REPORT: looked.",
         "usage": {"prompt_tokens": 5000, "completion_tokens": 50}},
        {"match": "PARENT", "repeat": True, "text": "Done.", "usage": small},
    ])  # fmt: skip
    b = priced(bastion, server)
    out = b.run("-p", "PARENT: go", "--approval-mode", "full-auto", "--output-format", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    session = result["session_usage"]
    assert session["total"]["input_tokens"] == 1000 + 5000 + 1000
    assert session["total"]["output_tokens"] == 10 + 50 + 10
    assert session["total"]["cost"] == pytest.approx((7000 * 1.0 + 70 * 2.0) / 1e6)
    assert session["total"]["cost_complete"] is True
    (child,) = session["children"].values()
    assert child["input_tokens"] == 5000


def test_max_cost_stops_a_parent_whose_child_spent_past_it(loopback, bastion):
    server = loopback([
        {"match": "PARENT", "unless": ["REPORT"], **task_call("CHILD: look"),
         "usage": {"prompt_tokens": 100_000, "completion_tokens": 10}},
        {"match": "CHILD", "text": "REPORT: looked.",
         "usage": {"prompt_tokens": 600_000, "completion_tokens": 10}},  # $0.60
        {"match": "PARENT", "repeat": True, "text": "never sent"},
    ])  # fmt: skip
    b = priced(bastion, server)
    out = b.run(
        "-p", "PARENT: go", "--approval-mode", "full-auto", "--max-cost", "0.5",
        "--output-format", "json",
    )  # fmt: skip
    assert out.returncode == 4, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["stop_reason"] == "max_cost"
    assert "cost limit" in result["error"]["message"]
    assert len(server.requests()) == 2  # the parent's first and the child's: no third


def session_of(out) -> tuple[str, dict]:
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["session_id"], result


def test_the_session_cap_holds_across_runs_and_processes(loopback, bastion):
    """The first run spends $0.60; a resumed run in a new process, under a session cap
    of $0.50, stops before its first request, though its own run has spent nothing."""
    server = loopback([
        {"match": "ONE", "text": "First.", "usage": {"prompt_tokens": 600_000, "completion_tokens": 10}},
        {"match": "TWO", "repeat": True, "text": "never sent"},
    ])  # fmt: skip
    b = priced(bastion, server)
    first = b.run("-p", "ONE", "--session-max-cost", "1", "--output-format", "json")
    assert first.returncode == 0, first.stderr
    session_id, _ = session_of(first)
    again = b.run(
        "-r", session_id, "-p", "TWO", "--max-cost", "0.5", "--session-max-cost", "0.5",
        "--output-format", "json",
    )  # fmt: skip
    assert again.returncode == 4, again.stderr
    _, result = session_of(again)
    assert result["stop_reason"] == "session_max_cost"
    assert "the session reached its cost limit ($0.6000 of $0.5)" in result["error"]["message"]
    assert len(server.requests()) == 1  # the second run sent nothing
    text = b.run("-r", session_id, "-p", "TWO", "--session-max-cost", "0.5")
    assert text.returncode == 4
    stopped = [
        line for line in text.stderr.splitlines() if "session reached its cost limit" in line
    ]
    assert len(stopped) == 1, text.stderr  # one line says it
    assert len(server.requests()) == 1


def test_the_session_cap_comes_from_the_config_and_stops_a_subagent(loopback, bastion):
    """A child's second request is stopped by the session's cap: what the parent and
    the child spent together reached it."""
    listing = {"tool_calls": [{"id": "l1", "name": "list_directory", "arguments": {}}]}
    server = loopback([
        {"match": "PARENT", "unless": ["REPORT", "interrupted"], **task_call("CHILD: look"),
         "usage": {"prompt_tokens": 300_000, "completion_tokens": 10}},  # $0.30
        {"match": "CHILD", "unless": ["list_directory"], **listing,
         "usage": {"prompt_tokens": 300_000, "completion_tokens": 10}},  # $0.30: $0.60 in all
        {"match": "CHILD", "repeat": True, "text": "REPORT: never sent"},
        {"match": "PARENT", "repeat": True, "text": "never sent"},
    ])  # fmt: skip
    b = priced(bastion, server)
    config = b.home.parent / "config" / "bastion" / "config.toml"
    config.write_text("session_max_cost = 0.5\n" + PRICED)
    out = b.run("-p", "PARENT: go", "--approval-mode", "full-auto", "--output-format", "json")
    assert out.returncode == 4, out.stderr
    session_id, result = session_of(out)
    assert result["stop_reason"] == "session_max_cost"
    assert len(server.requests()) == 2  # the parent's first and the child's first
    exported = json.loads(b.run("export", session_id).stdout)
    assert exported["runs"][-1]["error"]["code"] == "session_max_cost"
