"""Issue 27 item 15: a script can cap a headless run. `--max-turns`, `--max-cost` and
`--time-limit` (and the config's `max_turns`, `max_cost`, `time_limit`) each end the run
interrupted, with the limit recorded on the run in the store, named in the json result
(`stop_reason`, `error`) and exit code 4."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = pytest.mark.e2e


def listing(call_id: str, **extra):
    return {
        "tool_calls": [{"id": call_id, "name": "list_directory", "arguments": {}}],
        **extra,
    }


def result_of(out) -> dict:
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def stored_run(b, session_id: str) -> dict:
    """The run as the store keeps it (read back through `bastion export`)."""
    out = b.run("export", session_id)
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)["runs"]
    return run


def test_max_turns_stops_before_the_next_request_and_exits_4(loopback, bastion):
    server = loopback([listing("c1"), listing("c2"), listing("c3"), {"text": "done"}])
    b = bastion(server)
    out = b.run("-p", "look around", "--max-turns", "2", "--output-format", "json")
    assert out.returncode == 4, out.stderr
    result = result_of(out)
    assert result["status"] == "interrupted"
    assert result["stop_reason"] == "max_turns"
    assert result["error"]["code"] == "max_turns"
    assert "turn limit (2)" in result["error"]["message"]
    assert len(server.requests()) == 2  # the third request was never sent
    run = stored_run(b, result["session_id"])
    assert run["state"] == "interrupted" and run["error"]["code"] == "max_turns"
    assert "turn limit" in run["reason"]


def test_a_run_that_answers_within_its_turns_completes(loopback, bastion):
    server = loopback([listing("c1"), {"text": "done"}])
    out = bastion(server).run("-p", "look around", "--max-turns", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"


def test_text_output_says_which_limit_on_stderr(loopback, bastion):
    server = loopback([listing("c1"), listing("c2"), {"text": "done"}])
    out = bastion(server).run("-p", "look around", "--max-turns", "1")
    assert out.returncode == 4
    assert out.stdout == ""
    assert "run interrupted: the run reached its turn limit (1)" in out.stderr


def test_text_output_keeps_what_streamed_before_the_limit(loopback, bastion):
    """Issue 38: a run its budget stopped still prints, on stdout, the text the model
    gave before it stopped (it is kept in the store too); the limit is said on stderr."""
    server = loopback([listing("c1", text="Looking around first."), {"text": "never sent"}])
    out = bastion(server).run("-p", "look around", "--max-turns", "1")
    assert out.returncode == 4
    assert out.stdout == "Looking around first.\n"
    assert "run interrupted: the run reached its turn limit (1)" in out.stderr
    assert out.stderr.count("· list_directory") == 1  # each call's line once


PRICED = '[models."openai/test-model"]\ninput_price = 1.0\noutput_price = 2.0\n'


def test_max_cost_from_the_catalog_prices(loopback, bastion):
    big = {"prompt_tokens": 600_000, "completion_tokens": 10}  # $0.60 at $1/M input
    server = loopback([listing("c1", usage=big), listing("c2", usage=big), {"text": "done"}])
    b = bastion(server)
    (b.home.parent / "config" / "bastion").mkdir(parents=True)
    (b.home.parent / "config" / "bastion" / "config.toml").write_text(PRICED)
    out = b.run("-p", "look around", "--max-cost", "0.5", "--output-format", "json")
    assert out.returncode == 4, out.stderr
    result = result_of(out)
    assert result["stop_reason"] == "max_cost"
    assert "cost limit ($0.6000 of $0.5)" in result["error"]["message"]
    assert result["usage"]["cost"] == pytest.approx(0.60002)
    assert len(server.requests()) == 1


def test_max_cost_with_no_price_known_stops_after_the_first_request(loopback, bastion):
    server = loopback([listing("c1"), listing("c2"), {"text": "done"}])
    out = bastion(server).run("-p", "look", "--max-cost", "5", "--output-format", "json")
    assert out.returncode == 4, out.stderr
    result = result_of(out)
    assert result["stop_reason"] == "max_cost"
    assert "cost of this run is unknown" in result["error"]["message"]
    assert len(server.requests()) == 1


def test_time_limit_cuts_a_silent_stream_and_keeps_the_partial(loopback, bastion):
    silent = {"text": "half an answer", "chunk_size": 4, "fault": {"hang_after_chunks": 2}}
    server = loopback([silent])
    b = bastion(server)
    started = time.monotonic()
    out = b.run("-p", "hello", "--time-limit", "3", "--output-format", "json", timeout=30)
    took = time.monotonic() - started
    assert out.returncode == 4, out.stderr
    result = result_of(out)
    assert result["stop_reason"] == "time_limit"
    assert "time limit (3 s)" in result["error"]["message"]
    assert took < 20  # not the 90 s stream watchdog
    assert result["result"] == "half an "  # the partial is kept (two chunks of four)
    run = stored_run(b, result["session_id"])
    assert run["error"]["code"] == "time_limit"


def test_config_max_turns_applies_and_a_flag_overrides_it(loopback, bastion):
    turns = [listing("c1"), listing("c2"), {"text": "done"}]
    b = bastion(loopback(turns))
    (b.home.parent / "config" / "bastion").mkdir(parents=True)
    (b.home.parent / "config" / "bastion" / "config.toml").write_text("max_turns = 1\n")
    out = b.run("-p", "look around")
    assert out.returncode == 4, out.stderr
    b.env["OPENAI_BASE_URL"] = loopback(turns).base_url
    out = b.run("-p", "look around", "--max-turns", "5")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"


def test_a_trusted_project_may_lower_a_limit_but_not_raise_it(loopback, bastion):
    turns = [listing("c1"), listing("c2"), {"text": "done"}]
    b = bastion(loopback(turns))
    (b.home.parent / "config" / "bastion").mkdir(parents=True)
    (b.home.parent / "config" / "bastion" / "config.toml").write_text("max_turns = 5\n")
    (b.cwd / ".bastion").mkdir()
    (b.cwd / ".bastion" / "config.toml").write_text("max_turns = 1\ntime_limit = 900\n")
    out = b.run("-p", "look around", "--trust")
    assert out.returncode == 4, out.stderr  # lowered to 1
    (b.cwd / ".bastion" / "config.toml").write_text("max_turns = 50\n")
    b.env["OPENAI_BASE_URL"] = loopback(turns).base_url
    (b.home.parent / "config" / "bastion" / "config.toml").write_text("max_turns = 1\n")
    out = b.run("-p", "look around", "--trust")
    assert out.returncode == 4, out.stderr  # the user's 1 holds
    assert "max_turns 50 (above yours, 1" in out.stderr


@pytest.mark.parametrize(
    "flag,value", [("--max-turns", "0"), ("--max-turns", "1.5"), ("--max-cost", "-1"),
                   ("--time-limit", "inf"), ("--time-limit", "soon")]
)  # fmt: skip
def test_a_bad_limit_is_a_usage_error(bastion, flag, value):
    out = bastion().run("-p", "hello", flag, value)
    assert out.returncode == 2
    assert flag in out.stderr and "above 0" in out.stderr
