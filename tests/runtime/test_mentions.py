"""`@path` mentions: attached through the workspace's rules, bounded, found again for display."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.context.mentions import (
    MAX_FILE_BYTES,
    WorkspaceFiles,
    expand_mentions,
    fuzzy_filter,
    mention_at,
    split_attachments,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "x.py").write_text("print('x')\n")
    (root / "notes.md").write_text("no newline at the end")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    return root


def test_a_mentioned_file_is_attached_after_the_prompt(workspace: Path) -> None:
    expansion = expand_mentions("explain @src/x.py, please", str(workspace))
    assert expansion.text == (
        'explain @src/x.py, please\n\n<file path="src/x.py" length="11">\nprint(\'x\')\n</file>\n'
    )
    [attachment] = expansion.attachments
    assert (attachment.path, attachment.size, attachment.note) == ("src/x.py", 11, "")
    assert split_attachments(expansion.text) == ("explain @src/x.py, please", (attachment,))


def test_text_without_a_file_mention_is_sent_as_it_is(workspace: Path) -> None:
    for text in ("mail @alice about it", "no mentions", "a@b.c is an address"):
        assert expand_mentions(text, str(workspace)).text == text
        assert split_attachments(text) == (text, ())


def test_a_big_file_is_cut_with_a_note(workspace: Path) -> None:
    (workspace / "big.log").write_text("é" * MAX_FILE_BYTES)  # two bytes each
    expansion = expand_mentions("@big.log", str(workspace))
    [attachment] = expansion.attachments
    assert attachment.note == f"cut: the first {MAX_FILE_BYTES:,} of {2 * MAX_FILE_BYTES:,} bytes"
    assert attachment.length == MAX_FILE_BYTES // 2  # a character split by the cut is dropped
    assert "cut: the first" in attachment.summary()
    prompt, [found] = split_attachments(expansion.text)
    assert prompt == "@big.log" and found.note == attachment.note


def test_binary_and_refused_paths_get_a_note_and_no_contents(workspace: Path, tmp_path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    text = (
        f"@logo.png @blob.bin @latin1.txt @link.txt @../secret.txt @{tmp_path}/secret.txt @notes.md"
    )
    expansion = expand_mentions(text, str(workspace))
    notes = {a.path: a.note for a in expansion.attachments}
    # an image goes to the model as an image part (runtime.context.images), not as text
    assert "logo.png" not in notes
    assert notes["blob.bin"] == "not attached: a binary file (it contains NUL bytes)"
    assert notes["latin1.txt"] == "not attached: not UTF-8 text"
    assert "symbolic link" in notes["link.txt"]
    assert "'..'" in notes["../secret.txt"]
    assert "outside the workspace" in notes[f"{tmp_path}/secret.txt"]
    assert notes["notes.md"] == ""
    assert "TOP-SECRET" not in expansion.text  # the file outside never leaks
    prompt, found = split_attachments(expansion.text)
    assert prompt == text
    assert [(a.path, a.attached) for a in found] == [
        ("blob.bin", False),
        ("latin1.txt", False),
        ("link.txt", False),
        ("../secret.txt", False),
        (f"{tmp_path}/secret.txt", False),
        ("notes.md", True),
    ]


def test_quoted_paths_repeats_and_a_file_containing_our_markup(workspace: Path) -> None:
    (workspace / "my notes.txt").write_text('<file path="fake" length="1">\nx\n</file>\n')
    expansion = expand_mentions('@"my notes.txt" and @src/x.py and @src/x.py', str(workspace))
    assert [a.path for a in expansion.attachments] == ["my notes.txt", "src/x.py"]
    _, found = split_attachments(expansion.text)
    assert [a.path for a in found] == ["my notes.txt", "src/x.py"]


def test_mention_at_the_cursor() -> None:
    assert mention_at("look at @src/ma", 15) == (8, "src/ma")
    assert mention_at("@", 1) == (0, "")
    assert mention_at("look at @src x", 14) is None
    assert mention_at("mail a@b", 8) is None


def test_fuzzy_filter_ranks_names_first_then_tight_matches() -> None:
    paths = ["docs/main_notes.md", "src/app/main.py", "src/mapping.py", "README.md"]
    assert fuzzy_filter("main", paths) == [
        "src/app/main.py",
        "docs/main_notes.md",
        "src/mapping.py",
    ]
    assert fuzzy_filter("mp", paths)[0] == "src/app/main.py"  # m and p each start a word
    assert fuzzy_filter("mapp", paths) == ["src/mapping.py"]
    assert fuzzy_filter("MAIN.py", paths) == ["src/app/main.py", "src/mapping.py"]
    assert fuzzy_filter("", paths, limit=2) == paths[:2]
    assert fuzzy_filter("zz", paths) == []


def test_workspace_files_honour_ignores_and_refresh_when_stale(
    workspace: Path, monkeypatch
) -> None:
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.js").write_text("x")
    (workspace / "node_modules" / "pkg").mkdir(parents=True)
    (workspace / "node_modules" / "pkg" / "index.js").write_text("x")
    files = WorkspaceFiles(str(workspace))
    assert files.paths() == [] and files.stale
    assert files.refresh()
    listed = set(files.paths())
    assert {"src/x.py", "notes.md", ".gitignore"} <= listed
    assert not any(p.startswith(("build/", "node_modules/")) for p in listed)
    assert "link.txt" not in listed  # a symlink is never listed as a file
    assert not files.refresh()  # fresh: nothing done
    (workspace / "new.py").write_text("")
    monkeypatch.setattr("runtime.context.mentions.STALE_AFTER", 0.0)
    assert files.refresh()
    assert "new.py" in files.paths()


def test_workspace_files_are_bounded(workspace: Path) -> None:
    for i in range(30):
        (workspace / f"f{i}.txt").write_text("")
    files = WorkspaceFiles(str(workspace), max_files=10)
    files.refresh()
    assert len(files.paths()) <= 10
    assert not files.complete
