"""`call_summary`: a tool call in a few words, for the transcript, approvals and print mode."""

from __future__ import annotations

import pytest

from runtime.model.views import call_summary


@pytest.mark.parametrize(
    ("name", "arguments", "summary"),
    [
        ("run_command", '{"command": "pytest -q"}', "pytest -q"),
        ("run_command", '{"argv": ["git", "commit", "-m", "a b"]}', "git commit -m 'a b'"),
        ("read_file", '{"path": "src/a.py"}', "src/a.py"),
        ("read_file", '{"path": "src/a.py", "offset": 10, "limit": 20}', "src/a.py (lines 11-30)"),
        ("read_file", '{"path": "src/a.py", "offset": 10}', "src/a.py (from line 11)"),
        ("edit_file", '{"path": "x.py", "old_text": "a", "new_text": "b"}', "x.py"),
        ("write_file", '{"path": "notes.txt", "content": "hello"}', "notes.txt"),
        ("list_directory", "{}", "."),
        ("glob", '{"pattern": "**/*.py", "path": "src"}', "**/*.py in src"),
        ("search_files", '{"pattern": "TODO"}', '"TODO"'),
        ("read_output", '{"id": "out_1"}', "out_1"),
        ("mcp_tool", '{"a": 1}', '{"a": 1}'),  # unknown tools: their arguments
        ("read_file", "not json", "not json"),
        ("read_file", '{"path": 3}', '{"path": 3}'),  # not what the tool takes: as given
    ],
)
def test_call_summary_says_what_a_call_does(name: str, arguments: str, summary: str) -> None:
    assert call_summary(name, arguments) == summary


def test_call_summary_is_cut_to_its_limit() -> None:
    text = call_summary("run_command", '{"command": "' + "x" * 300 + '"}', limit=20)
    assert len(text) == 20 and text.endswith("…")
