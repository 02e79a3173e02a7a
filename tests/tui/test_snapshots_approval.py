"""Snapshots of an approval with its diff and the rule `a` would save, at 80x24 and
140x45 (pytest-textual-snapshot; update with `--snapshot-update` and look at them,
then `python -m tests.tui.test_snapshots_approval` copies them to screenshots/)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.model.llm import ToolCall
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import make_app, run_settled, until_still, wait_for
from tests.tui.test_snapshots import CONFIG_PY, _same_textual
from tui.widgets import ApprovalPrompt

__all__ = ["_same_textual"]  # the fixture that skips these under another Textual

HERE = Path(__file__).parent
SCREENSHOTS = {
    "test_pending_edit_with_diff_and_rule[80x24].svg": "app-approval-diff-80x24.svg",
    "test_pending_edit_with_diff_and_rule[140x45].svg": "app-approval-diff-140x45.svg",
    "test_tool_round_with_its_diff[140x45].svg": "app-tool-diff-140x45.svg",
}


def _edit_app(tmp_path: Path, *then: ScriptedTurn) -> Any:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.py").write_text(CONFIG_PY)
    args = json.dumps(
        {
            "path": "src/config.py",
            "old_text": '    return data["bastion"]\n',
            "new_text": '    return data.get("bastion", {})\n',
        }
    )
    turn = ScriptedTurn(
        text="An empty file parses to `{}`; fall back to an empty table.",
        tool_calls=(ToolCall("call_e", "edit_file", args),),
    )
    toolbox = WorkspaceToolbox(str(tmp_path), tmp_path / ".artifacts")
    return make_app(tmp_path, [turn, *then], toolbox=toolbox, first_prompt="Fix parse_config")


async def _until_asking(pilot: Any) -> None:
    await pilot.app.parts_ready.wait()  # mounted after the first frame
    prompt = pilot.app.query_one(ApprovalPrompt)
    await wait_for(lambda: prompt.has_class("-shown") and bool(prompt.rules), pilot)
    await wait_for(lambda: pilot.app.view.active_run.state == "awaiting_approval", pilot)
    await until_still(pilot)


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_pending_edit_with_diff_and_rule(snap_compare, tmp_path, size):
    """The prompt "Fix parse_config", the answer line and a yellow `? edit_file
    {"path": "src/config.py", ...}` line `awaiting approval`. Above the prompt box a
    yellow-barred approval: `Allow edit_file src/config.py?`, then the diff —
    `--- a/src/config.py` / `+++ b/src/config.py` bold, the `@@ -1,3 +1,3 @@` hunk in
    the accent colour, two context lines dim, `-    return data["bastion"]` red and
    `+    return data.get("bastion", {})` green — then `a saves: edits under src/`
    and the keys `[y] once  [a] always  [n] deny  [e] deny with a message`."""
    assert snap_compare(_edit_app(tmp_path), terminal_size=size, run_before=_until_asking)


async def _approved_and_done(pilot: Any) -> None:
    await _until_asking(pilot)
    await pilot.press("y")
    await wait_for(lambda: run_settled(pilot.app), pilot)
    await until_still(pilot)


@pytest.mark.parametrize("size", [(80, 24), (140, 45)], ids=["80x24", "140x45"])
def test_tool_round_with_its_diff(snap_compare, tmp_path, size):
    """The same edit approved with `y`: the row turns to a green `● edit_file {...}`
    with its result line under it and the coloured diff kept in the row (`-    return
    data["bastion"]` red, `+    return data.get("bastion", {})` green), then the
    answer "Done: parse_config falls back to an empty table."; no approval line; the
    status line starts `● done`."""
    app = _edit_app(tmp_path, ScriptedTurn(text="Done: parse_config falls back to an empty table."))
    assert snap_compare(app, terminal_size=size, run_before=_approved_and_done)


def copy_screenshots(root: Path = HERE.parent.parent) -> list[Path]:
    source = HERE / "__snapshots__" / "test_snapshots_approval"
    target = root / "screenshots"
    target.mkdir(exist_ok=True)
    copied = []
    for name, public in SCREENSHOTS.items():
        if (source / name).exists():
            shutil.copyfile(source / name, target / public)
            copied.append(target / public)
    return copied


if __name__ == "__main__":
    for path in copy_screenshots():
        print(path, file=sys.stderr)
