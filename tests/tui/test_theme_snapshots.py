"""Snapshots of each shipped theme at 80x24 and 140x45 (pytest-textual-snapshot).

One conversation in all of them: a question; an answer that starts with a
heading and runs a command whose output tail stays in its row (exit code,
duration, the last lines, the key that shows all of it); then an answer with a
heading, inline code, a highlighted Python block and a list. The command's
result is the shape run_command returns, with a fixed duration so the screen
is the same on every run. Update with `pytest tests/tui --snapshot-update`,
look at every SVG, then `python -m tests.tui.test_snapshots` copies them to
screenshots/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime import HarnessClient
from runtime.ipc.local import local_client
from runtime.model.llm import ToolCall
from runtime.model.tools import ToolOutcome
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox
from tests.tui.conftest import SNAPSHOT_ID, open_driven, run_settled, until_still, wait_for
from tests.tui.test_snapshots import _same_textual  # noqa: F401  (skips on another Textual)
from tools.result import ToolResult
from tui.app import BastionApp

SMALL = (80, 24)
LARGE = (140, 45)
THEME_SCREENSHOTS = {  # snapshot file -> name under screenshots/
    f"test_theme_{size}[{theme}].svg": f"theme-{theme.removeprefix('bastion-')}-{size}.svg"
    for theme in ("bastion-dark", "bastion-light", "bastion-high-contrast")
    for size in ("80x24", "140x45")
}

PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 4 items

tests/test_config.py ..F.                                                [100%]

=================================== FAILURES ===================================
_____________________________ test_empty_file __________________________________
    def test_empty_file():
>       assert parse_config("") == {}
E       KeyError: 'bastion'
src/config.py:3: KeyError
=========================== short test summary info ============================
FAILED tests/test_config.py::test_empty_file - KeyError: 'bastion'
========================= 1 failed, 3 passed in 0.21s ==========================
"""

FIRST = "## Running the tests\n\nFirst the config tests, to see what fails."

ANSWER = """## Why it fails

`parse_config` indexes `data["bastion"]`, and an empty file parses to `{}`:

```python
def parse_config(text: str) -> dict:
    return tomllib.loads(text).get("bastion", {})
```

- empty file → `{}`
- no `[bastion]` table → `{}`
"""


class CommandToolbox(RecordingToolbox):
    """Answers run_command with a result of run_command's own shape (fixed duration)."""

    async def run(
        self, name: str, arguments: str, on_output: Any = None, on_start: Any = None
    ) -> ToolOutcome:
        self.calls.append((name, json.loads(arguments)))
        data = {
            "command": "pytest -q tests/test_config.py",
            "cwd": ".",
            "exit_code": 1,
            "duration_ms": 1840,
            "timed_out": False,
            "output": PYTEST_OUTPUT,
        }
        result = ToolResult.success("run_command", data)
        outcome = result.to_dict()
        outcome.pop("images")
        return ToolOutcome(True, result.model_text(), outcome)


def _app(tmp_path: Path, theme: str) -> Any:
    command = ToolCall(
        "call_1", "run_command", json.dumps({"command": "pytest -q tests/test_config.py"})
    )
    turns = [
        ScriptedTurn(text=FIRST, tool_calls=(command,), chunk_size=9),
        ScriptedTurn(text=ANSWER, chunk_size=9),
    ]
    provider, toolbox = ScriptedProvider(turns), CommandToolbox()

    async def opener() -> tuple[HarnessClient, str]:  # full-auto: the command runs without asking
        harness, conv_id = await open_driven(
            tmp_path, provider, toolbox, approval_mode="full-auto", conversation_id=SNAPSHOT_ID
        )
        return await local_client(harness, client="test"), conv_id

    return BastionApp(opener=opener, first_prompt="Why does the config test fail?", theme=theme)


async def _settled(pilot: Any) -> None:
    await wait_for(lambda: run_settled(pilot.app), pilot)
    await until_still(pilot)


@pytest.mark.parametrize("theme", ["bastion-dark", "bastion-light", "bastion-high-contrast"])
def test_theme_80x24(snap_compare, tmp_path, theme):
    """The bottom of the conversation at 80x24 in `theme`: the command row's last lines
    (`FAILED tests/test_config.py::test_empty_file`, `1 failed, 3 passed`) and
    `ctrl+o or click: all 14 lines`, then the answer's `Why it fails` heading at the
    left margin, a line with inline code, the highlighted Python block, the two-item
    list; the prompt box and the status bar. Dark: light text on near-black; light:
    dark text on near-white with a darker code block; high contrast: white on black
    with bright accents."""
    assert snap_compare(_app(tmp_path, theme), terminal_size=SMALL, run_before=_settled)


@pytest.mark.parametrize("theme", ["bastion-dark", "bastion-light", "bastion-high-contrast"])
def test_theme_140x45(snap_compare, tmp_path, theme):
    """The whole conversation at 140x45 in `theme`: the question in a bar; the heading
    `Running the tests` at the left margin and its line; `● run_command pytest -q
    tests/test_config.py` with `└ exit 1 · 1.8 s · 14 lines` (exit 1 in the theme's
    error colour) and the last 10 lines of pytest's output dimmed under it, then
    `ctrl+o or click: all 14 lines`; the answer `Why it fails` with inline code, a
    highlighted Python block and a list; the prompt box and status bar."""
    assert snap_compare(_app(tmp_path, theme), terminal_size=LARGE, run_before=_settled)
