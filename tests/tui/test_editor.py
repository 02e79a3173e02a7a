"""Issue 40: Ctrl+G edits the prompt in the user's $VISUAL / $EDITOR; redirect (cut the
run's step and send now) is Ctrl+S or Ctrl+Enter."""

from __future__ import annotations

import stat

from runtime.testing.scripted import ScriptedProvider
from tests.tui.conftest import SIZE, notices, wait_for
from tui.widgets import PromptInput


def editor(tmp_path, body: str):
    script = tmp_path / "fake-editor"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


async def test_ctrl_g_puts_what_the_editor_saved_in_the_prompt(
    harness_process, tmp_path, monkeypatch
):
    # The editor appends a line to the file it is given (its last argument).
    script = editor(tmp_path, 'printf "%s\\nsecond line\\n" "$(cat "$1")" > "$1"')
    monkeypatch.setenv("VISUAL", f"{script}")
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"first line", "ctrl+g")
        await wait_for(lambda: prompt.text == "first line\nsecond line", pilot)
        assert app.focused is prompt
        assert app.view is not None and not app.view.runs  # not sent: Enter sends


async def test_an_editor_that_fails_leaves_the_prompt_as_it_was(
    harness_process, tmp_path, monkeypatch
):
    monkeypatch.setenv("VISUAL", str(editor(tmp_path, "exit 3")))
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        prompt = app.query_one(PromptInput)
        await pilot.press(*"keep me", "ctrl+g")
        await wait_for(lambda: "exited with 3: prompt unchanged" in notices(app), pilot)
        assert prompt.text == "keep me"
        monkeypatch.setenv("VISUAL", str(tmp_path / "no-such-editor"))
        await pilot.press("ctrl+g")
        await wait_for(lambda: "cannot run" in notices(app), pilot)
        assert prompt.text == "keep me"
