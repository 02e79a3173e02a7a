"""`echo data | bastion -p PROMPT`: the prompt first, the piped data after it, fenced."""

from __future__ import annotations

import subprocess

import pytest

from tui.piped import STDIN_LIMIT, compose_prompt

pytestmark = pytest.mark.e2e


def _last_user(server) -> str:
    return server.requests()[0]["messages"][-1]["content"]


def test_prompt_then_piped_stdin_as_fenced_block(loopback, bastion):
    server = loopback([{"text": "explained"}])
    out = bastion(server).run("-p", "explain", input="line one\nline two\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "explained\n"
    assert _last_user(server) == "explain\n\n```\nline one\nline two\n```"


def test_stdin_alone_is_still_the_prompt(loopback, bastion):
    server = loopback([{"text": "ok"}])
    out = bastion(server).run("-p", input="just stdin\n")
    assert out.returncode == 0, out.stderr
    assert _last_user(server) == "just stdin\n"


def test_empty_stdin_adds_nothing(loopback, bastion):
    server = loopback([{"text": "ok"}])
    out = bastion(server).run("-p", "hello", input="")
    assert out.returncode == 0, out.stderr
    assert _last_user(server) == "hello"


def test_backticks_in_stdin_get_a_longer_fence(loopback, bastion):
    server = loopback([{"text": "ok"}])
    data = "```python\nprint(1)\n```\n"
    out = bastion(server).run("-p", "what is this", input=data)
    assert out.returncode == 0, out.stderr
    assert _last_user(server) == f"what is this\n\n````\n{data}````"


def test_large_stdin_is_cut_with_a_note(loopback, bastion):
    server = loopback([{"text": "ok"}])
    # Multi-byte characters straddle the limit: the cut must not split one.
    data = "é" * (STDIN_LIMIT // 2 + 1000)
    b = bastion(server)
    proc = subprocess.run(
        b.cmd("-p", "summarise"),
        input=data.encode(),
        capture_output=True,
        cwd=b.cwd,
        env=b.env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    sent = _last_user(server)
    kept = STDIN_LIMIT // 2 * 2  # whole two-byte characters only
    total = len(data.encode())
    assert sent.startswith("summarise\n\n```\n" + "é" * (kept // 2) + "\n```\n")
    assert sent.endswith(
        f"[stdin was cut: the first {kept:,} of {total:,} bytes are shown (the limit is 256 KiB)]"
    )


def test_non_utf8_stdin_with_a_prompt_is_refused_and_nothing_is_stored(loopback, bastion):
    server = loopback([{"text": "never"}])
    b = bastion(server)
    proc = subprocess.run(
        b.cmd("-p", "explain"),
        input="caf\xe9\n".encode("latin-1"),
        capture_output=True,
        cwd=b.cwd,
        env=b.env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"stdin is not valid UTF-8 (byte 0xe9 at offset 3)" in proc.stderr
    assert b"iconv" in proc.stderr
    assert server.requests() == []
    listed = b.run("sessions", "--json")
    assert listed.stdout.strip() == "[]", listed.stdout


def test_compose_prompt_keeps_blank_input_out():
    assert compose_prompt("p", "  \n", 3, 3) == "p"
    assert compose_prompt("p\n", "x", 1, 1) == "p\n\n```\nx\n```"
