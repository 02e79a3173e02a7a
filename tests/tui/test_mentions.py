"""`@` file completion in the app, and what a message with mentions sends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime.context.mentions import MAX_FILE_BYTES
from runtime.model.records import EntryKind
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import SIZE, HangingProvider, run_settled, wait_for
from tui.widgets import PromptInput, UserEntry
from tui.widgets.completion import FileCompletion


def make_workspace(root: Path) -> Path:
    (root / "src" / "app").mkdir(parents=True)
    (root / "src" / "app" / "main.py").write_text("def main():\n    return 1\n")
    (root / "src" / "mapping.py").write_text("MAP = {}\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / "big.log").write_text("x" * (MAX_FILE_BYTES + 100))
    return root


async def open_in(harness_process, tmp_path: Path, provider: ScriptedProvider) -> tuple[Any, Path]:
    """The loopback provider and harness processes of a session in a workspace of files."""
    workspace = make_workspace(tmp_path / "ws")
    return harness_process(provider, folder=workspace), workspace


def shown(completion: FileCompletion) -> list[str]:
    return [str(completion.get_option_at_index(i).prompt) for i in range(completion.option_count)]


async def test_typing_at_lists_files_filters_and_chooses(harness_process, tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="It returns 1.")])
    proc, _ = await open_in(harness_process, tmp_path, provider)
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        completion = app.query_one(FileCompletion)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"explain @")
        await wait_for(lambda: completion.is_open, pilot)
        assert set(shown(completion)) == {
            "src/app/main.py",
            "src/mapping.py",
            "docs/guide.md",
            "big.log",
        }
        await pilot.press(*"main")
        await wait_for(lambda: shown(completion)[:1] == ["src/app/main.py"], pilot)
        assert shown(completion) == ["src/app/main.py", "src/mapping.py"]
        await pilot.press("down")  # moves in the list, not through the prompt's history
        assert completion.highlighted == 1
        await pilot.press("up", "tab")
        assert not completion.is_open
        assert prompt.value == "explain @src/app/main.py "
        await pilot.press(*"briefly", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        [user] = app.query(UserEntry)
        rendered = str(user.render())
        assert rendered.startswith("explain @src/app/main.py briefly")
        assert "📎 @src/app/main.py (25 bytes)" in rendered
        assert "return 1" not in rendered  # shown compactly, not the contents
    sent = proc.requests[0].body["messages"][-1]["content"]
    assert sent == (
        "explain @src/app/main.py briefly\n\n"
        '<file path="src/app/main.py" length="25">\ndef main():\n    return 1\n</file>\n'
    )
    snap = await proc.snapshot()
    assert [e.text for e in snap.entries if e.kind == EntryKind.USER] == [sent]


async def test_escape_closes_the_list_and_enter_then_sends(harness_process, tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="ok")])
    proc, _ = await open_in(harness_process, tmp_path, provider)
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        completion = app.query_one(FileCompletion)
        await pilot.press(*"see @big")
        await wait_for(lambda: shown(completion) == ["big.log"], pilot)
        await pilot.press("escape")
        assert not completion.is_open
        await pilot.press(*".log")  # still the dismissed mention: the list stays closed
        await pilot.pause(0.1)
        assert not completion.is_open
        await pilot.press("enter")
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        rendered = str(app.query_one(UserEntry).render())
        assert f"cut: the first {MAX_FILE_BYTES:,} of {MAX_FILE_BYTES + 100:,} bytes" in rendered
    sent = proc.requests[0].body["messages"][-1]["content"]
    assert sent.startswith(
        f'see @big.log\n\n<file path="big.log" note="cut: the first {MAX_FILE_BYTES:,} of '
        f'{MAX_FILE_BYTES + 100:,} bytes" length="{MAX_FILE_BYTES}">\n'
    )
    assert len(sent) < MAX_FILE_BYTES + 200


async def test_refused_paths_are_not_attached_and_say_why(harness_process, tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="ok")])
    proc, workspace = await open_in(harness_process, tmp_path, provider)
    (tmp_path / "secret.txt").write_text("TOP-SECRET\n")
    os.symlink(tmp_path / "secret.txt", workspace / "docs" / "link.md")
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        completion = app.query_one(FileCompletion)
        await pilot.press(*"@docs/")
        await wait_for(lambda: completion.is_open, pilot)
        assert shown(completion) == ["docs/guide.md"]  # the link is never offered
        await pilot.press("escape")
        app.query_one(PromptInput).set_value("read @docs/link.md and @../secret.txt")
        await pilot.press("end", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await pilot.pause(0.05)
        rendered = str(app.query_one(UserEntry).render())
        assert "@docs/link.md: not attached:" in rendered
        assert "@../secret.txt: not attached:" in rendered
    sent = proc.requests[0].body["messages"][-1]["content"]
    assert "TOP-SECRET" not in sent
    assert sent.startswith("read @docs/link.md and @../secret.txt\n\n")


async def test_a_withdrawn_steer_comes_back_as_typed_not_with_the_file(harness_process, tmp_path):
    provider = HangingProvider("Working")
    proc, _ = await open_in(harness_process, tmp_path, provider)
    app = proc.app(first_prompt="start")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: bool(proc.requests), pilot)
        await wait_for(lambda: app.view is not None and app.view.active_run is not None, pilot)
        app.query_one(FileCompletion).close()
        app.query_one(PromptInput).set_value("mind @docs/guide.md")
        await pilot.press("end", "enter")
        await wait_for(lambda: bool(app.view and app.view.queued_inbox), pilot)
        [queued] = app.view.queued_inbox
        assert queued.text.startswith('mind @docs/guide.md\n\n<file path="docs/guide.md"')
        await pilot.press("escape")  # interrupt: the steer comes back to the prompt
        await wait_for(lambda: run_settled(app), pilot)
        prompt = app.query_one(PromptInput)
        await wait_for(lambda: prompt.value == "mind @docs/guide.md", pilot)
