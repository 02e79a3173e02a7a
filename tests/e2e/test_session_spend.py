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
