"""`bastion -p` in the default `ask` mode cannot ask: what it refused is said on stderr
with the flags that would allow it, listed in the json result, and the exit code (3)
says the run could not do all it was asked."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def turns():
    return [
        call("c1", "write_file", path="hello.py", content="print('hello')\n"),
        call("c2", "run_command", command="python3 hello.py"),
        {"text": "I could not write or run it."},
    ]


def test_refusals_are_named_with_how_to_allow_them_and_exit_3(loopback, bastion):
    server = loopback(turns())
    b = bastion(server)
    out = b.run("-p", "make hello.py and run it", "--output-format", "json")
    assert out.returncode == 3, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed"
    assert [(r["tool"], r["summary"]) for r in result["refused"]] == [
        ("write_file", "hello.py"),
        ("run_command", "python3 hello.py"),
    ]
    assert result["refused"][0]["arguments"]["path"] == "hello.py"
    assert "needs approval" in result["refused"][0]["reason"]
    last = out.stderr.strip().splitlines()[-1]
    assert "refused 2 tool calls (approval mode ask; -p cannot ask)" in last, last
    assert "write_file hello.py; run_command python3 hello.py" in last
    assert "--approval-mode auto-edit" in last and "--approval-mode full-auto" in last
    assert "--allow" not in last  # a rule on python3 would allow everything: never offered
    assert not (b.cwd / "hello.py").exists()


def test_allowed_by_the_flags_it_names_the_run_exits_0(loopback, bastion):
    server = loopback([*turns()[:2], {"text": "hello ran"}])
    b = bastion(server)
    out = b.run("-p", "make hello.py and run it", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello ran\n"
    assert "refused" not in out.stderr
    assert (b.cwd / "hello.py").exists()


def test_text_output_keeps_the_answer_on_stdout_and_exits_3(loopback, bastion):
    server = loopback(turns())
    out = bastion(server).run("-p", "make hello.py and run it")
    assert out.returncode == 3
    assert out.stdout == "I could not write or run it.\n"
    assert "to allow, rerun with" in out.stderr


def test_in_full_auto_no_flag_is_offered():
    """Refused in full-auto, a call was denied by a rule or a path: no flag would allow
    it, so none is named."""
    from runtime.model.records import ToolCallRecord
    from tui.print_mode import refusal_summary

    call = ToolCallRecord(
        "c", "s", "r", "e", 0, "run_command", '{"command": "rm -rf build"}', False,
        "denied", "denied", 0.0, 0.0,
    )  # fmt: skip
    line = refusal_summary([call], "full-auto")
    assert "run_command rm -rf build" in line and "--approval-mode" not in line
    assert "--allow" not in line and "refused list" in line
    assert "--allow 'rm -rf build'" in refusal_summary([call], "ask")
