"""Rewind with file restore: what side-effecting calls change is recorded before they
start, and a restore puts it back byte-exact, saying exactly what it cannot undo."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from runtime.model.llm import ToolCall
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def git(cwd, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return out.stdout.decode()


def call(n: int, name: str, **args) -> ToolCall:
    return ToolCall(f"c{n}", name, json.dumps(args))


async def session(tmp_path, work, calls: list[ToolCall]):
    """'first' (answered), then 'do stuff', which makes `calls` and answers."""
    turns = [ScriptedTurn(text="hello"), ScriptedTurn(tool_calls=tuple(calls)),
             ScriptedTurn(text="done")]  # fmt: skip
    toolbox = WorkspaceToolbox(str(work), tmp_path / "artifacts")
    harness = await open_harness(tmp_path, ScriptedProvider(turns), toolbox)
    conv = await harness.create_conversation(
        str(work), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    for text in ("first", "do stuff"):
        item = await harness.submit(conv.id, text)
        assert (await harness.wait(item.id, conv.id)).state == "completed"
    await harness.release(conv.id)
    snap = await harness.store.snapshot(conv.id)
    assert all(c.state == "done" and c.result["ok"] for c in snap.tool_calls), [
        (c.name, c.state, c.result) for c in snap.tool_calls
    ]
    message = next(e for e in snap.entries if e.text == "do stuff")
    return harness, conv, message


async def test_rewind_restores_writes_edits_and_a_command_in_git(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    git(work, "init", "-q")
    (work / "a.txt").write_bytes("line one\nline two\r\nünï tail".encode())
    (work / "b.txt").write_text("tracked b\n")
    (work / "gone.txt").write_text("tracked, deleted by the command\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "base")
    (work / "b.txt").write_text("tracked b, staged change\n")
    git(work, "add", "b.txt")
    (work / "u.txt").write_text("the user's untracked file\n")
    before = {p.name: p.read_bytes() for p in work.iterdir() if p.is_file()}
    index_before = git(work, "diff", "--cached")
    stash_before = git(work, "stash", "list")

    harness, conv, message = await session(tmp_path, work, [
        call(1, "write_file", path="new/made.txt", content="made by the model\n"),
        call(2, "edit_file", path="a.txt", old_text="line one", new_text="LINE ONE"),
        call(3, "run_command", command="echo more >> b.txt; rm gone.txt u.txt; echo x > cmd.txt"),
    ])  # fmt: skip
    assert (work / "a.txt").read_bytes().startswith(b"LINE ONE")
    assert not (work / "u.txt").exists() and (work / "cmd.txt").exists()
    # Recording touched neither the index nor the stash list.
    assert git(work, "diff", "--cached") == index_before
    assert git(work, "stash", "list") == stash_before

    rewound = await harness.rewind(conv.id, message.id)
    assert rewound.prompt == "do stuff"
    plan = await harness.restore_plan(conv.id, message.id)
    assert {(f.path, f.action) for f in plan.files} == {
        ("new/made.txt", "remove"),
        ("a.txt", "restore"),
        ("b.txt", "restore"),
        ("gone.txt", "restore"),
        ("u.txt", "restore"),
        ("cmd.txt", "remove"),
    }
    assert plan.cannot_undo == ()
    report = await harness.restore(plan)
    assert sorted(report.removed) == ["cmd.txt", "new/made.txt"] and report.failed == ()
    after = {p.name: p.read_bytes() for p in work.iterdir() if p.is_file()}
    assert after == before
    assert git(work, "diff", "--cached") == index_before
    assert git(work, "stash", "list") == stash_before
    await harness.close()


async def test_outside_git_the_plan_says_what_it_cannot_undo(tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    (work / "keep.txt").write_text("kept\n")
    (work / "notes.txt").write_text("original notes\n")
    harness, conv, message = await session(tmp_path, work, [
        call(1, "write_file", path="w.txt", content="written\n"),
        call(2, "run_command", command="echo cmd >> notes.txt; echo changed > w.txt"),
        call(3, "write_file", path="notes.txt", content="model notes\n", overwrite=True),
    ])  # fmt: skip
    plan = await harness.restore_plan(conv.id, message.id)
    assert {(f.path, f.action) for f in plan.files} == {
        ("w.txt", "remove"),
        ("notes.txt", "restore"),
    }
    command = "echo cmd >> notes.txt; echo changed > w.txt"
    assert plan.cannot_undo == (
        f"`{command}` ran outside a git repository: what it changed cannot be undone "
        "(files changed since it ran: notes.txt)",
        f"notes.txt: `{command}` (outside git) ran before write_file changed it; it is "
        "restored to how it was just before that change",
    )
    report = await harness.restore(plan)
    assert report.removed == ("w.txt",) and report.restored == ("notes.txt",)
    # notes.txt comes back as the command left it: the plan said so.
    assert (work / "notes.txt").read_text() == "original notes\ncmd\n"
    assert not (work / "w.txt").exists() and (work / "keep.txt").read_text() == "kept\n"
    await harness.close()


async def test_a_command_outside_git_names_the_files_it_changed(tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    (work / "data.txt").write_text("data\n")
    harness, conv, message = await session(tmp_path, work, [
        call(1, "run_command", command="echo more >> data.txt; echo new > fresh.txt"),
    ])  # fmt: skip
    plan = await harness.restore_plan(conv.id, message.id)
    assert plan.files == ()
    assert plan.cannot_undo == (
        "`echo more >> data.txt; echo new > fresh.txt` ran outside a git repository: what it "
        "changed cannot be undone (files changed since it ran: data.txt, fresh.txt)",
    )
    await harness.close()


async def test_a_plan_from_an_earlier_entry_covers_the_later_calls_and_records_land_with_the_start(
    tmp_path,
):
    work = tmp_path / "plain"
    work.mkdir()
    harness, conv, message = await session(tmp_path, work, [
        call(1, "write_file", path="ok.txt", content="fine\n"),
    ])  # fmt: skip
    plan = await harness.restore_plan(conv.id, message.id)
    assert [(f.path, f.content) for f in plan.files] == [("ok.txt", None)]
    first = (await harness.store.snapshot(conv.id)).entries[0]
    assert (await harness.restore_plan(conv.id, first.id)).files == plan.files
    # The record was committed with the call's start: its ledger event is the same
    # transaction's (the call's running event and the record share a commit).
    rows = await harness.store.read(
        lambda db: db.execute("SELECT kind, path, content FROM call_effects").fetchall()
    )
    assert rows == [("file", "ok.txt", None)]
    await harness.close()


class FailingCapture(WorkspaceToolbox):
    def capture_effects(self, name: str, arguments: str) -> dict:
        raise PermissionError("cannot read it")


async def test_a_failed_recording_lets_the_call_run_and_the_plan_says_so(tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    turns = [ScriptedTurn(tool_calls=(call(1, "write_file", path="x.txt", content="x"),)),
             ScriptedTurn(text="done")]  # fmt: skip
    box = FailingCapture(str(work), tmp_path / "artifacts")
    harness = await open_harness(tmp_path, ScriptedProvider(turns), box)
    conv = await harness.create_conversation(
        str(work), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "go")
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    assert (work / "x.txt").read_text() == "x"
    snap = await harness.store.snapshot(conv.id)
    plan = await harness.restore_plan(conv.id, snap.entries[0].id)
    (written,) = snap.tool_calls
    assert plan.files == () and plan.cannot_undo == (
        f"write_file ({written.id}): nothing was recorded about what it changed "
        "(PermissionError: cannot read it)",
    )
    await harness.close()


async def test_a_rewind_in_a_fork_restores_what_the_copied_calls_changed(tmp_path):
    work = tmp_path / "plain"
    work.mkdir()
    (work / "f.txt").write_text("before\n")
    harness, conv, _ = await session(tmp_path, work, [
        call(1, "write_file", path="f.txt", content="after\n", overwrite=True),
    ])  # fmt: skip
    forked = await harness.fork(conv.id)
    copied = next(e for e in (await harness.snapshot(forked.id)).entries if e.text == "do stuff")
    plan = await harness.restore_plan(forked.id, copied.id)
    assert [(f.path, f.content) for f in plan.files] == [("f.txt", b"before\n")]
    assert plan.cannot_undo == ()
    await harness.restore(plan)
    assert (work / "f.txt").read_text() == "before\n"
    await harness.close()


async def test_restore_checks_current_hashes_and_leaves_later_changes_alone(tmp_path):
    """Issue 25, item 13: /restore applied the plan /rewind made without looking at the
    files: an edit the user made since was overwritten, a file the user created where
    the model's had been was deleted, and it said "restored". Now each path must still
    be as the plan found it; what changed since is left alone and listed."""
    work = tmp_path / "plain"
    work.mkdir()
    (work / "kept.txt").write_text("the user's text\n")
    (work / "edited.txt").write_text("before the model\n")
    harness, conv, message = await session(tmp_path, work, [
        call(1, "write_file", path="kept.txt", content="the model's\n", overwrite=True),
        call(2, "write_file", path="edited.txt", content="the model's\n", overwrite=True),
        call(3, "write_file", path="made.txt", content="made by the model\n"),
        call(4, "write_file", path="remade.txt", content="made by the model\n"),
    ])  # fmt: skip
    plan = await harness.restore_plan(conv.id, message.id)
    assert [(f.path, f.action) for f in plan.files] == [
        ("edited.txt", "restore"), ("kept.txt", "restore"),
        ("made.txt", "remove"), ("remade.txt", "remove"),
    ]  # fmt: skip
    # After /rewind, before /restore: the user edits one file and replaces another.
    (work / "edited.txt").write_text("the user's edit after the rewind\n")
    (work / "remade.txt").unlink()
    (work / "remade.txt").write_text("the user's own file now\n")
    report = await harness.restore(plan)
    await harness.close()
    assert report.restored == ("kept.txt",) and report.removed == ("made.txt",)
    assert [path for path, _ in report.left_alone] == ["edited.txt", "remade.txt"]
    assert all("changed after /rewind" in why for _, why in report.left_alone)
    assert (work / "kept.txt").read_text() == "the user's text\n"
    assert not (work / "made.txt").exists()
    assert (work / "edited.txt").read_text() == "the user's edit after the rewind\n"
    assert (work / "remade.txt").read_text() == "the user's own file now\n"
