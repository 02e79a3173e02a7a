"""Snapshots of `@` file completion, the session picker and the first-run screen.

Each test says what you should see. Kept apart from test_snapshots.py (same
pinned fixtures from conftest) so each screen family updates on its own:
`pytest tests/tui/test_picker_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runtime.testing.scripted import ScriptedProvider
from tests.runtime.helpers import open_harness
from tests.tui.conftest import MODEL, wait_for
from tests.tui.test_snapshots import _same_textual  # noqa: F401 (an autouse fixture)
from tui.app import BastionApp
from tui.widgets.completion import FileCompletion

SMALL, LARGE = (80, 24), (140, 45)
FILES = ["src/app/main.py", "src/app/models.py", "src/mapping.py", "docs/manual.md", "README.md"]


def completion_app(tmp_path: Path) -> BastionApp:
    root = tmp_path / "ws"
    for age, name in enumerate(FILES):  # fixed times: the list is newest first
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {name}\n")
        os.utime(path, (1_700_000_000 - age, 1_700_000_000 - age))

    async def opener() -> Any:
        harness = await open_harness(tmp_path, ScriptedProvider([]))
        conv = await harness.create_conversation(str(root), settings={"model": MODEL})
        await harness.drive(conv.id, interactive=True)
        return harness, conv.id

    return BastionApp(opener=opener)


async def _typed_at_ma(pilot: Any) -> None:
    await wait_for(pilot.app.ready.is_set, pilot)
    await pilot.press(*"explain @ma")
    completion = pilot.app.query_one(FileCompletion)
    await wait_for(lambda: completion.is_open and completion.option_count == 3, pilot)
    await pilot.press("down")
    await pilot.pause(0.05)


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "140x45"])
def test_file_completion_open(snap_compare, tmp_path, size):
    """The prompt reads `explain @ma`; above it a rounded box lists the files matching
    "ma", best first (all hold "ma" in the name, so the shorter path first):
    src/mapping.py, docs/manual.md, src/app/main.py, with the second (docs/manual.md)
    on a lighter band: Down moved there. src/app/models.py and README.md are not
    listed. The welcome line is at the top and the status bar at the bottom."""
    assert snap_compare(completion_app(tmp_path), terminal_size=size, run_before=_typed_at_ma)
