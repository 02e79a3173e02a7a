"""Issue 34, item 9: a subagent's conversation is not a session of its own.

The `task` tool starts a child conversation; the session list (`bastion sessions`,
its `--json`, `sessions search`, the pickers) lists top-level sessions only, and a
match in a child's text is its parent's hit: the child is reached from the parent
(its `task` row), as the app and attach show it. Through the real `bastion`.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e import conftest as e2e

bastion, loopback = e2e.bastion, e2e.loopback  # the real command, a loopback model (fixtures)
pytestmark = pytest.mark.e2e


def call(name: str, arguments: dict) -> dict:
    return {"id": "call_0", "name": name, "arguments": arguments}


TURNS = [
    {"match": "PARENT", "unless": ["REPORT-A"], "text": "Delegating.",
     "tool_calls": [call("task", {"description": "look", "prompt": "CHILD-A: zebrafish?"})]},
    {"match": "CHILD-A", "repeat": True, "text": "REPORT-A: the zebrafish is striped."},
    {"match": "PARENT", "repeat": True, "text": "The child answered."},
]  # fmt: skip


def parent_with_a_child(loopback, bastion):
    b = bastion(loopback(TURNS))
    out = b.run("-p", "PARENT: ask a child", "--output-format", "json")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["result"] == "The child answered.", out
    return b, result["session_id"]


def test_sessions_lists_the_parent_only_and_finds_a_childs_text_under_it(loopback, bastion):
    b, parent = parent_with_a_child(loopback, bastion)
    listed = b.run("sessions")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [parent]
    rows = json.loads(b.run("sessions", "--json").stdout)
    assert [row["id"] for row in rows] == [parent]
    everywhere = json.loads(b.run("sessions", "--all", "--json").stdout)
    assert [row["id"] for row in everywhere] == [parent]
    # "zebrafish" is only in the child's own entries: the hit is its parent's
    found = json.loads(b.run("sessions", "search", "zebrafish", "--json").stdout)
    assert [hit["id"] for hit in found] == [parent]
    assert "zebrafish" in found[0]["snippet"]
