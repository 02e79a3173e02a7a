"""Silent and empty streams through the installed command: dropped quickly, retried, reported.

The idle time is 3 s (BASTION_STREAM_IDLE_TIMEOUT: long enough that a loaded
machine's stall before the first byte does not trip it); before the watchdog, a
silent server held print mode for httpx's 300 s read timeout per attempt.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.testing.waiting import wait_for

pytestmark = pytest.mark.e2e

QUICK = {"BASTION_STREAM_IDLE_TIMEOUT": "3", "BASTION_MAX_RETRIES": "1"}
SILENT = {"text": "half an answer", "chunk_size": 4, "fault": {"hang_after_chunks": 2}}


def test_a_silent_stream_is_retried_and_the_answer_arrives(loopback, bastion):
    server = loopback([SILENT, {"text": "the whole answer"}])
    b = bastion(server)
    started = time.monotonic()
    out = b.run("-p", "hi", env=QUICK)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "the whole answer\n"
    assert "retrying" in out.stderr and "no data" in out.stderr  # the retry says why
    assert "3 s" in out.stderr
    assert time.monotonic() - started < 45  # an outer bound: not httpx's 300 s
    wait_for(lambda: len(server.requests()) == 2, "the server to record both requests")


def test_a_server_that_stays_silent_fails_the_run_soon(loopback, bastion):
    server = loopback([SILENT, SILENT])
    b = bastion(server)
    started = time.monotonic()
    # (silent by design: a shorter idle time cannot cut a stream that was to answer)
    out = b.run("-p", "hi", env=QUICK | {"BASTION_STREAM_IDLE_TIMEOUT": "1.5"}, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "no data from openai for 1.5 s" in out.stderr and "Traceback" not in out.stderr
    assert time.monotonic() - started < 45  # an outer bound: not httpx's 300 s
    wait_for(lambda: len(server.requests()) == 2, "the server to record both requests")


def test_an_empty_answer_is_asked_again(loopback, bastion):
    server = loopback([{"text": ""}, {"text": "now with words"}])
    b = bastion(server)
    out = b.run("-p", "hi", env=QUICK)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "now with words\n"
    assert "retrying" in out.stderr and "empty answer" in out.stderr


def test_empty_answers_fail_the_run_instead_of_succeeding_with_nothing(loopback, bastion):
    server = loopback([{"text": ""}, {"reasoning": "only thinking"}])
    b = bastion(server)
    out = b.run("-p", "hi", "--output-format", "json", env=QUICK)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "empty answer" in out.stdout + out.stderr


def test_keepalive_only_stream_fails_the_run_with_one_line(loopback, bastion):
    """Issue 25, item 2: a server that sends only `: ping` comments used to hold print
    mode for ever; the idle time (config.toml's `stream_idle_timeout`) counts model data."""
    pings = {"text": "half an answer", "chunk_size": 4, "fault": {"ping_after_chunks": 1}}
    server = loopback([pings, pings])
    b = bastion(server)
    config = Path(b.env["XDG_CONFIG_HOME"]) / "bastion" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("stream_idle_timeout = 1.5\n", encoding="utf-8")  # (pings only after)
    started = time.monotonic()
    out = b.run("-p", "hi", env={"BASTION_MAX_RETRIES": "1"}, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    failures = [line for line in out.stderr.splitlines() if "no data from openai" in line]
    assert failures and "1.5 s" in failures[-1], out.stderr
    assert time.monotonic() - started < 45  # an outer bound: the pings would go on for ever
    # tried, retried once, failed (the server records a request when it reads it)
    wait_for(lambda: len(server.requests()) == 2, "the server to record both requests")
