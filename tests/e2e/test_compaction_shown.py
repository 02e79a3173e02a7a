"""Issue 27 item 13 in print mode: a compaction is said on stderr while it works and
what it freed when it is done (text), and streamed as `compaction.progress` events
(stream-json), instead of a silent stall."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


def compacting_on_the_third(loopback, bastion):
    server = loopback(
        [
            {"text": "first answer " * 50},
            {"text": "second answer"},
            {"fault": {"status": 400, "body": OVERFLOW}},
            {"text": "THE SUMMARY", "chunk_size": 3},
            {"text": "third answer"},
        ]
    )
    b = bastion(server)
    assert b.run("-p", "first " * 200).returncode == 0
    assert b.run("-p", "-c", "second").returncode == 0
    return b


def test_text_mode_says_it_compacts_and_what_it_freed(loopback, bastion):
    out = compacting_on_the_third(loopback, bastion).run("-p", "-c", "third")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "third answer\n"
    lines = out.stderr.splitlines()
    assert any(line.startswith("bastion: compacting 2 entries (~") for line in lines), lines
    assert any(line.startswith("bastion: compacted 2 entries: ~") for line in lines), lines


def test_stream_json_carries_the_progress(loopback, bastion):
    b = compacting_on_the_third(loopback, bastion)
    out = b.run("-p", "-c", "third", "--output-format", "stream-json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    progress = [e for e in lines if e["type"] == "compaction.progress"]
    assert progress[0]["phase"] == "started"
    assert progress[-1]["phase"] == "done" and progress[-1]["freed"] > 100
    assert progress[0]["entries"] == 2 and progress[0]["tokens"] > 200
    assert lines[-1]["result"] == "third answer"
