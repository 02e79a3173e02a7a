"""`bastion -p` end to end: the installed command against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

ANSWER = "Hello from the loopback server. \u2028 Unicode line separators survive."


def test_text_answer_on_stdout_only(loopback, bastion):
    server = loopback(
        [{"text": ANSWER, "chunk_size": 5, "usage": {"prompt_tokens": 21, "completion_tokens": 8}}]
    )
    b = bastion(server)
    out = b.run("-p", "say hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert ANSWER not in out.stderr
    body = server.requests()[0]
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][-1] == {"role": "user", "content": "say hello"}


def test_prompt_from_stdin(loopback, bastion):
    server = loopback([{"text": "from stdin"}])
    out = bastion(server).run("-p", input="what is on stdin?\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "from stdin\n"
    assert server.requests()[0]["messages"][-1]["content"] == "what is on stdin?\n"


def test_json_result_object(loopback, bastion):
    server = loopback(
        [{"text": "json answer", "usage": {"prompt_tokens": 30, "completion_tokens": 2}}]
    )
    result = bastion(server).json("-p", "hi", "--output-format", "json")
    assert result["status"] == "completed" and result["result"] == "json answer"
    assert result["usage"]["input_tokens"] == 30 and result["usage"]["output_tokens"] == 2
    assert result["error"] is None
    assert len(result["session_id"]) == 36 and len(result["run_id"]) == 36


def test_stream_json_events_then_result(loopback, bastion):
    server = loopback([{"text": "streamed " * 20, "chunk_size": 3, "delay_ms": 2}])
    out = bastion(server).run("-p", "hi", "--output-format", "stream-json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert "text.delta" in types and "entry.added" in types and "run.updated" in types
    assert types[-1] == "result" and lines[-1]["result"] == "streamed " * 20
    deltas = "".join(line["text"] for line in lines if line["type"] == "text.delta")
    assert deltas == "streamed " * 20
    seqs = [line["seq"] for line in lines if line["type"] == "text.delta"]
    assert seqs == list(range(1, len(seqs) + 1))


def test_continue_and_resume_add_to_one_conversation_and_export_shows_it(
    loopback, bastion, tmp_path
):
    server = loopback([{"text": "first"}, {"text": "second"}, {"text": "third"}])
    b = bastion(server)
    first = b.json("-p", "one", "--output-format", "json")
    second = b.json("-p", "-c", "two", "--output-format", "json")
    third = b.json("-p", "--resume", first["session_id"], "three", "--output-format", "json")
    assert first["session_id"] == second["session_id"] == third["session_id"]
    assert len({first["run_id"], second["run_id"], third["run_id"]}) == 3
    # The model saw the whole conversation on the third request.
    contents = [m["content"] for m in server.requests()[2]["messages"][1:]]
    assert contents == ["one", "first", "two", "second", "three"]
    exported = json.loads(b.run("export", first["session_id"]).stdout)
    assert [(e["kind"], e["status"], e["text"]) for e in exported["entries"]] == [
        ("user", "complete", "one"),
        ("assistant", "complete", "first"),
        ("user", "complete", "two"),
        ("assistant", "complete", "second"),
        ("user", "complete", "three"),
        ("assistant", "complete", "third"),
    ]
    assert all("id" in e for e in exported["entries"])
    md = tmp_path / "out.md"
    assert (
        b.run("export", first["session_id"], "--format", "markdown", "-o", str(md)).returncode == 0
    )
    assert "## User" in md.read_text() and "third" in md.read_text()
    listed = json.loads(b.run("sessions", "--json").stdout)
    assert [s["id"] for s in listed] == [first["session_id"]]


def test_session_id_creates_then_reuses(loopback, bastion):
    server = loopback([{"text": "a"}, {"text": "b"}])
    b = bastion(server)
    sid = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"
    assert b.json("-p", "--session-id", sid, "x", "--output-format", "json")["session_id"] == sid
    assert b.json("-p", "--session-id", sid, "y", "--output-format", "json")["session_id"] == sid
    assert len(json.loads(b.run("export", sid).stdout)["entries"]) == 4


def test_same_request_key_twice_creates_one_run(loopback, bastion):
    server = loopback([{"text": "only once"}, {"text": "must not be asked"}])
    b = bastion(server)
    sid = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d01"
    one = b.json(
        "-p", "--session-id", sid, "--request-key", "k1", "do it", "--output-format", "json"
    )
    two = b.json(
        "-p", "--session-id", sid, "--request-key", "k1", "do it", "--output-format", "json"
    )
    assert one["run_id"] == two["run_id"] and two["result"] == "only once"
    assert len(server.requests()) == 1
    exported = json.loads(b.run("export", sid).stdout)
    assert len(exported["runs"]) == 1


def test_sessions_search_and_rm(loopback, bastion):
    server = loopback([{"text": "x"}, {"text": "y"}])
    b = bastion(server)
    keep = b.json("-p", "about penguins", "--output-format", "json")["session_id"]
    gone = b.json("-p", "about walruses", "--output-format", "json")["session_id"]
    found = json.loads(b.run("sessions", "search", "walrus", "--json").stdout)
    assert [s["id"] for s in found] == [gone]
    assert b.run("sessions", "rm", gone).returncode == 0
    assert [s["id"] for s in json.loads(b.run("sessions", "--json").stdout)] == [keep]
    assert b.run("export", gone).returncode == 2


def test_rate_limit_then_success_is_retried_honouring_retry_after(loopback, bastion):
    server = loopback([
        {"fault": {"status": 429, "retry_after": 1}},
        {"text": "after the retry"},
    ])  # fmt: skip
    out = bastion(server).run("-p", "hi", "--output-format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"] == "after the retry"
    assert "retrying" in out.stderr and len(server.requests()) == 2


def test_stream_dropped_midway_restarts_the_answer_cleanly(loopback, bastion):
    server = loopback([
        {"text": "this partial will be thrown away", "chunk_size": 4,
         "fault": {"disconnect_after_chunks": 3}},
        {"text": "the whole answer", "chunk_size": 4},
    ])  # fmt: skip
    b = bastion(server)
    out = b.run("-p", "hi", "--output-format", "stream-json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert any(line["type"] == "attempt.reset" for line in lines)
    assert lines[-1]["result"] == "the whole answer"
    sid = lines[-1]["session_id"]
    answers = [
        e for e in json.loads(b.run("export", sid).stdout)["entries"] if e["kind"] == "assistant"
    ]
    assert [(a["status"], a["text"]) for a in answers] == [("complete", "the whole answer")]


def test_server_error_that_persists_fails_the_run_with_exit_1(loopback, bastion):
    server = loopback([{"fault": {"status": 500}}] * 3)
    out = bastion(server).run(
        "-p", "hi", "--output-format", "json", env={"BASTION_MAX_RETRIES": "2"}
    )
    assert out.returncode == 1
    result = json.loads(out.stdout)
    assert result["status"] == "failed" and result["error"]["message"]
    assert len(server.requests()) == 3


def test_an_unknown_theme_is_refused_in_print_mode_too(loopback, bastion):
    server = loopback([{"text": "never"}])
    out = bastion(server).run("-p", "hi", "--theme", "nope")
    assert out.returncode == 2
    assert "nope" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == "" and server.requests() == []
