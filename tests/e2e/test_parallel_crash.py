"""SIGKILL the real `bastion -p` while a turn's reads run together (runtime.schedule),
then resume: every call ends with exactly one result, the command after the reads
takes effect once, and every request is valid for the OpenAI wire format.

The scripted turn asks for three reads, then a command that appends one line
(idempotent, as in the crash matrix), then one more read; it is served again while
the command's output is not in the request, the way a model repeats what it did
not see finish."""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from tests.e2e.test_crash_matrix import assert_valid_requests, run_bastion, store_state

pytestmark = pytest.mark.e2e

COMMAND = "grep -qx done log.txt 2>/dev/null || echo done >> log.txt; echo appended-ok"


def call(key: str, name: str, arguments: dict) -> dict:
    return {"id": f"call_{key}", "name": name, "arguments": arguments}


TASK = [
    {"text": "Reading them together.", "unless": ["appended-ok"],
     "tool_calls": [call("a", "read_file", {"path": "a.txt"}),
                    call("b", "read_file", {"path": "b.txt"}),
                    call("c", "read_file", {"path": "c.txt"}),
                    call("d", "run_command", {"command": COMMAND}),
                    call("e", "read_file", {"path": "log.txt"})]},
    {"text": "All read and logged.", "repeat": True},
]  # fmt: skip

# (first crash, crash during the resume or None): inside the group of three reads, at
# its end, on the command after it and on the read after that.
POINTS = [
    ("call.started:2", None),
    ("call.started:3", None),
    ("call.executed:1", None),
    ("call.executed:2", None),
    ("call.result:1", None),
    ("call.result:3", None),
    ("call.started:4", None),
    ("call.executed:4", None),
    ("call.started:5", None),
    ("call.started:2", "call.started:2"),
]


@pytest.mark.parametrize(
    ("point", "again"), POINTS, ids=[f"{p}+{a}" if a else p for p, a in POINTS]
)
def test_sigkill_during_parallel_reads_then_resume(loopback, bastion, point, again):
    server = loopback(TASK)
    b = bastion(server)
    for name in "abc":
        (b.cwd / f"{name}.txt").write_text(f"{name} " * 2000 + "\n")
    conv_id = str(uuid.UUID(int=uuid.uuid4().int & ~(0xF << 76) | (0x7 << 76)))
    common = ("--approval-mode", "full-auto", "--output-format", "stream-json")

    first = run_bastion(b, "-p", "read and log", "--session-id", conv_id, *common, failpoint=point)
    assert first.returncode == -signal.SIGKILL, (point, first.returncode, first.stderr[-2000:])
    before, _ = store_state(b.home, conv_id)
    if again is not None:
        crashed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=again)
        assert crashed.returncode == -signal.SIGKILL, (again, crashed.stderr[-2000:])
    resumed = run_bastion(b, "-p", "--resume", conv_id, *common, failpoint=None)
    assert resumed.returncode == 0, (point, resumed.returncode, resumed.stderr[-3000:])
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["result"] == "All read and logged."

    assert (b.cwd / "log.txt").read_text() == "done\n"  # the command took effect once
    after, results = store_state(b.home, conv_id)
    for entry_id in before:
        assert entry_id in after, (point, "a committed entry was lost")
    keys = [key for key, _ in results]
    assert len(keys) == len(set(keys)), (point, "a call has two results")
    final_request = server.requests()[-1]["messages"]
    replies = {m["tool_call_id"]: m["content"] for m in final_request if m["role"] == "tool"}
    for name in "abc":  # the reads' results reached the model, whole
        assert any(f"{name} {name} {name}" in text for text in replies.values()), (point, name)
    assert_valid_requests(server.requests())
