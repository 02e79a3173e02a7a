"""`bastion -p "explain @file"` attaches the file exactly as the app does."""

from __future__ import annotations

import pytest

from runtime.context.mentions import expand_mentions

pytestmark = pytest.mark.e2e


def test_print_mode_attaches_mentioned_files(loopback, bastion, tmp_path):
    server = loopback([{"text": "It prints x."}])
    b = bastion(server)
    (b.cwd / "src").mkdir()
    (b.cwd / "src" / "x.py").write_text("print('x')\n")
    (b.cwd / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "outside.txt").write_text("TOP-SECRET\n")
    prompt = "explain @src/x.py, not @blob.bin or @../outside.txt"
    out = b.run("-p", prompt)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "It prints x.\n"
    sent = server.requests()[0]["messages"][-1]["content"]
    assert sent == expand_mentions(prompt, str(b.cwd)).text  # the same as every front end
    assert sent.startswith(
        prompt + '\n\n<file path="src/x.py" length="11">\nprint(\'x\')\n</file>\n'
    )
    assert "TOP-SECRET" not in sent
    # what was not attached is said on stderr; stdout keeps only the answer
    assert "@blob.bin: not attached: a binary file" in out.stderr
    assert "@../outside.txt: not attached:" in out.stderr
