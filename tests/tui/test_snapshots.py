"""Snapshots of the app's screen (pytest-textual-snapshot).

Each test says what you should see. Screens are deterministic: a scripted
provider, no ids or times on screen, a fixed theme and terminal size, no cursor
blink (see conftest). Update with `pytest tests/tui --snapshot-update`, look at
the report, then copy the SVGs to screenshots/ with
`python -m tests.tui.test_snapshots` (the README shows them).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import textual

from runtime.model.llm import ProviderError, ToolCall
from runtime.model.tools import ToolOutcome
from runtime.testing.scripted import ScriptedTurn
from tests.runtime.helpers import RecordingToolbox
from tests.tui.conftest import (
    SIZE,
    HangingProvider,
    make_app,
    screen_settled,
    until_still,
    wait_for,
)
from tui.widgets import ApprovalPrompt, AssistantEntry

HERE = Path(__file__).parent
SNAPSHOT_TEXTUAL = "8.2.8"  # the Textual that drew the accepted snapshots
SCREENSHOTS = {  # snapshot file -> name under screenshots/
    "test_answer_with_a_tool_call.svg": "app-answer.svg",
    "test_answer_in_the_light_theme.svg": "app-answer-light.svg",
    "test_pending_approval.svg": "app-approval.svg",
    "test_interrupted_answer.svg": "app-interrupted.svg",
    "test_welcome.svg": "app-welcome.svg",
    "test_steer_queued_while_running.svg": "app-steer.svg",
    "test_failed_run.svg": "app-failed.svg",
}

CONFIG_PY = """def parse_config(text: str) -> dict:
    data = tomllib.loads(text)
    return data["bastion"]
"""

ANSWER = """`parse_config` indexes `data["bastion"]` without checking it exists, so an
empty file (which parses to `{}`) raises **KeyError**.

Fix it by falling back to an empty table:

```python
def parse_config(text: str) -> dict:
    data = tomllib.loads(text)
    return data.get("bastion", {})
```

- empty file → `{}`
- a file without `[bastion]` → `{}`
"""


@dataclass
class TableToolbox(RecordingToolbox):
    """RecordingToolbox answering from `results` (tool name -> model text)."""

    results: dict[str, str] = field(default_factory=dict)

    async def run(
        self, name: str, arguments: str, on_output: Any = None, on_start: Any = None
    ) -> ToolOutcome:
        self.calls.append((name, json.loads(arguments)))
        return ToolOutcome(True, self.results.get(name, f"{name} ok"), {"name": name})


@pytest.fixture(autouse=True)
def _same_textual() -> None:
    """Snapshots are exact screens, and another Textual draws some cells differently."""
    if textual.__version__ != SNAPSHOT_TEXTUAL:
        pytest.skip(
            f"snapshots were made with textual {SNAPSHOT_TEXTUAL}, this is {textual.__version__}: "
            "regenerate them with --snapshot-update and look at them before committing"
        )


def _answer_app(tmp_path: Path, theme: str = "bastion-dark") -> Any:
    read = ToolCall("call_1", "read_file", json.dumps({"path": "src/config.py"}))
    turns = [
        ScriptedTurn(text="Let me look at the loader.", tool_calls=(read,), chunk_size=8),
        ScriptedTurn(text=ANSWER, chunk_size=7),
    ]
    toolbox = TableToolbox(results={"read_file": "src/config.py (3 lines)\n" + CONFIG_PY})
    return make_app(
        tmp_path,
        turns,
        toolbox=toolbox,
        first_prompt="Why does parse_config fail on an empty file?",
        theme=theme,
    )


async def _until_settled(pilot: Any) -> None:
    await screen_settled(pilot)


def test_answer_with_a_tool_call(snap_compare, tmp_path):
    """The question in a bar at the top; "Let me look at the loader." then a green
    `● read_file {"path": "src/config.py"}` line with `└ src/config.py (3 lines)` under
    it; the Markdown answer with inline code, bold KeyError, a highlighted Python
    block and a two-item list. Empty prompt box; status bar
    `● done · ask · scripted/bastion-test · ctx ~134 · 122 tok · 7b8c9d0e` (at 100
    columns the key hints do not fit and are left out)."""
    assert snap_compare(_answer_app(tmp_path), terminal_size=SIZE, run_before=_until_settled)


def test_answer_in_the_light_theme(snap_compare, tmp_path):
    """The same conversation as test_answer_with_a_tool_call in bastion-light: dark
    text on a near-white background, blue prompt bar and border, green tool glyph."""
    app = _answer_app(tmp_path, theme="bastion-light")
    assert snap_compare(app, terminal_size=SIZE, run_before=_until_settled)


def test_pending_approval(snap_compare, tmp_path):
    """ "Writing the fix." then a yellow `? write_file {"path": "src/config.py", ...}
    awaiting approval` line; above the prompt box a yellow-barred prompt
    `Allow write_file src/config.py?`, `a saves: edits under src/` and the keys
    `[y] once  [a] always  [n] deny  [e] deny with a message` (this toolbox computes
    no diff); status bar starts `◌ awaiting approval · ask`."""
    args = json.dumps({"path": "src/config.py", "content": "def parse_config(text): ..."})
    turns = [
        ScriptedTurn(text="Writing the fix.", tool_calls=(ToolCall("call_w", "write_file", args),))
    ]
    app = make_app(tmp_path, turns, toolbox=TableToolbox(), first_prompt="Fix parse_config")

    async def until_asking(pilot: Any) -> None:
        await pilot.app.parts_ready.wait()  # mounted after the first frame
        prompt = pilot.app.query_one(ApprovalPrompt)
        await wait_for(lambda: prompt.has_class("-shown") and bool(prompt.rules), pilot)
        await wait_for(lambda: pilot.app.view.active_run.state == "awaiting_approval", pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=until_asking)


def test_interrupted_answer(snap_compare, tmp_path):
    """The prompt "Refactor the loader", the partial answer "I'll start by splitting
    the loader into" and under it a yellow `◼ interrupted`; status starts `● interrupted · ask`."""
    provider = HangingProvider("I'll start by splitting the loader into")
    app = make_app(tmp_path, provider, first_prompt="Refactor the loader")

    async def interrupt(pilot: Any) -> None:
        def streamed() -> bool:
            widgets = list(pilot.app.query(AssistantEntry))
            return bool(widgets) and widgets[0].text_shown == provider.text

        await wait_for(streamed, pilot)
        await pilot.press("escape")
        await _until_settled(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=interrupt)


def test_steer_queued_while_running(snap_compare, tmp_path):
    """A run still going: "Refactor the loader", the partial "Reading the loader
    first." (no marker), above the prompt box `» steer keep the public API  (↑ on an
    empty prompt edits it)`; the placeholder says Enter steers and Tab queues a
    follow-up; status `◌ writing · ask · 1 queued · …`."""
    provider = HangingProvider("Reading the loader first.")
    app = make_app(tmp_path, provider, first_prompt="Refactor the loader")

    async def steer(pilot: Any) -> None:
        await wait_for(provider.streamed.is_set, pilot)
        await wait_for(lambda: bool(list(pilot.app.query(AssistantEntry))), pilot)
        await pilot.press(*"keep the public API", "enter")
        await wait_for(lambda: bool(pilot.app.view.queued_inbox), pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=steer)


def test_failed_run(snap_compare, tmp_path):
    """The prompt "Summarize the diff", the partial "The diff touches three" and
    under it a red `✗ failed: the model is overloaded`; status starts `● failed · ask`."""
    error = ProviderError("the model is overloaded", provider="scripted", code="overloaded")
    turn = ScriptedTurn(
        text="The diff touches three files", chunk_size=11, error=error, error_after_chunks=2
    )
    app = make_app(tmp_path, [turn], first_prompt="Summarize the diff")
    assert snap_compare(app, terminal_size=SIZE, run_before=_until_settled)


def test_welcome(snap_compare, tmp_path):
    """A new conversation: `bastion  type a request and press Enter` at the top, the
    prompt box with the placeholder "Ask Bastion to do something…", status
    `idle · ask · scripted/bastion-test · ctx ~0 · 7b8c9d0e`."""
    app = make_app(tmp_path, [])

    async def ready(pilot: Any) -> None:
        await wait_for(pilot.app.ready.is_set, pilot)
        await until_still(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


#: The picker's, @file's and first-run's, copied with the rest (they went stale when
#: they were copied by hand).
PICKER_SCREENSHOTS = {
    "test_session_picker[80x24].svg": "app-picker.svg",
    "test_session_picker_searched[80x24].svg": "app-picker-search.svg",
    "test_file_completion_open[80x24].svg": "app-mentions.svg",
    "test_first_run[80x24].svg": "app-first-run.svg",
}


#: The trust question (tests/tui/test_trust_screen.py).
TRUST_SCREENSHOTS = {"test_the_trust_question.svg": "app-trust.svg"}

APP_SCREENSHOTS = {
    "test_empty_start[80x24].svg": "app-empty-80x24.svg",
    "test_help[140x45].svg": "app-help-140x45.svg",
    "test_queued_steer_and_follow_up[140x45].svg": "app-queued-140x45.svg",
}


def copy_screenshots(root: Path = HERE.parent.parent) -> list[Path]:
    """Copy the accepted snapshots to screenshots/ under their README names."""
    from tests.tui.test_theme_snapshots import THEME_SCREENSHOTS

    target = root / "screenshots"
    target.mkdir(exist_ok=True)
    copied = []
    for module, names in (
        ("test_snapshots", SCREENSHOTS),
        ("test_theme_snapshots", THEME_SCREENSHOTS),
        ("test_picker_snapshots", PICKER_SCREENSHOTS),
        ("test_snapshots_app", APP_SCREENSHOTS),
        ("test_trust_screen", TRUST_SCREENSHOTS),
    ):
        source = HERE / "__snapshots__" / module
        for name, public in names.items():
            if (source / name).exists():
                shutil.copyfile(source / name, target / public)
                copied.append(target / public)
    return copied


if __name__ == "__main__":
    for path in copy_screenshots():
        print(path, file=sys.stderr)
