"""Issue 25, item 1, through `bastion import`: an export holding a lone surrogate
(`\\ud800`, which JSON allows) used to crash the import with UnicodeEncodeError; each
becomes U+FFFD and a pair split in two escapes is one character."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def test_split_surrogates_through_bastion_import_become_replacement_characters(loopback, bastion):
    b = bastion(loopback([{"text": "an answer"}]))
    first = b.json("-p", "hello", "--output-format", "json")
    exported = b.run("export", first["session_id"])
    assert exported.returncode == 0, exported.stderr
    document = json.loads(exported.stdout)
    document["conversation"]["title"] = "t\ud800"
    answer = next(e for e in document["entries"] if e["kind"] == "assistant")
    answer["text"] = "lone \udc00, pair \ud83d\ude00"
    path = b.cwd / "export.json"
    path.write_text(json.dumps(document), encoding="ascii")  # escapes: `\\ud800`
    assert "\\ud800" in path.read_text()
    imported = b.run("import", str(path))
    assert imported.returncode == 0, imported.stderr
    assert "Traceback" not in imported.stderr
    new_id = imported.stdout.strip().splitlines()[-1]
    again = json.loads(b.run("export", new_id).stdout)
    assert again["conversation"]["title"] == "t\ufffd"
    texts = [e["text"] for e in again["entries"] if e["kind"] == "assistant"]
    assert texts == ["lone \ufffd, pair \U0001f600"]
