"""Issue 38: /restore undoes what the commands did, not what happened between them.

A command's git record holds the tree before it and the tree it left; a file made
between two commands (bastion's own /export, or the user's) is in neither command's
change and is left alone. Before, the plan compared the tree before the first
command with the workspace as it is, and removed the export, blaming the command."""

from __future__ import annotations

from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.runtime.test_restore import call, git


async def test_a_file_made_between_two_commands_is_not_removed(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    git(work, "init", "-q")
    (work / "kept.txt").write_text("base\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "base")
    first = call(1, "run_command", command="echo one > one.txt")
    second = call(2, "run_command", command="echo two > two.txt; echo more >> kept.txt")
    turns = [ScriptedTurn(tool_calls=(first,)), ScriptedTurn(text="one done"),
             ScriptedTurn(tool_calls=(second,)), ScriptedTurn(text="two done")]  # fmt: skip
    toolbox = WorkspaceToolbox(str(work), tmp_path / "artifacts")
    harness = await open_harness(tmp_path, ScriptedProvider(turns), toolbox)
    conv = await harness.create_conversation(
        str(work), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    try:
        item = await harness.submit(conv.id, "first")
        assert (await harness.wait(item.id, conv.id)).state == "completed"
        (work / "bastion-export.md").write_text("# the session, as /export writes it\n")
        item = await harness.submit(conv.id, "second")
        assert (await harness.wait(item.id, conv.id)).state == "completed"
        snap = await harness.store.snapshot(conv.id)
        message = next(e for e in snap.entries if e.text == "first")
        plan = await harness.restore_plan(conv.id, message.id)
        assert {(f.path, f.action) for f in plan.files} == {
            ("one.txt", "remove"), ("two.txt", "remove"), ("kept.txt", "restore"),
        }  # fmt: skip
        report = await harness.restore(plan)
        assert report.failed == ()
        assert (work / "bastion-export.md").exists()  # made between the commands: kept
        assert (work / "kept.txt").read_text() == "base\n"
        assert not (work / "one.txt").exists() and not (work / "two.txt").exists()
    finally:
        await harness.close()
