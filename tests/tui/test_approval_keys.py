"""The approval prompt's keys in the app: y once, a always (rule shown, then session or
project), n deny, e deny with a message the model receives; diffs in prompt and row."""

from __future__ import annotations

import json
import tomllib
from typing import Any

from runtime.config.settings import settings_path
from runtime.model.llm import ToolCall
from runtime.model.records import Approval, ToolCallState
from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import SIZE, run_settled, wait_for
from tui.app import BastionApp
from tui.widgets import ApprovalPrompt, ToolCallLine


def command_turns(*commands: str) -> list[ScriptedTurn]:
    turns = [
        ScriptedTurn(tool_calls=(ToolCall(f"c{i}", "run_command", json.dumps({"command": c})),))
        for i, c in enumerate(commands)
    ]
    return [*turns, ScriptedTurn(text="Done.")]


async def asking(app: BastionApp, pilot: Any, with_rule: bool = True) -> ApprovalPrompt:
    await app.parts_ready.wait()  # mounted after the first frame
    prompt = app.query_one(ApprovalPrompt)
    await wait_for(lambda: prompt.has_class("-shown") and app.focused is prompt, pilot)
    if with_rule:
        await wait_for(lambda: bool(prompt.rules), pilot)
    return prompt


async def test_a_saves_the_prefix_rule_for_the_session(harness_process):
    turns = command_turns("git status -s", "git status --porcelain")
    proc = harness_process(turns)
    app = proc.app(first_prompt="status")
    async with app.run_test(size=SIZE) as pilot:
        prompt = await asking(app, pilot)
        text = prompt.question
        assert "Allow run_command git status -s?" in text
        assert "a saves: commands starting with `git status`" in text
        assert "[a] always" in text
        await pilot.press("a")
        assert "[s] this session" in prompt.question and "[p] the project" in prompt.question
        await pilot.press("c")  # back: nothing saved
        assert "[a] always" in prompt.question
        await pilot.press("a", "escape")  # Esc goes back too, and interrupts nothing
        assert "[a] always" in prompt.question and app.focused is prompt
        assert app.view is not None and app.view.active_run is not None
        await pilot.press("a", "s")
        await wait_for(lambda: run_settled(app), pilot)
        assert app.focused is app.query_one("#prompt")
        rows = [str(line.render()) for line in app.query(ToolCallLine)]
        assert "allowed by commands starting with `git status`" in rows[1]
        rules = await app.harness.rules(app.conversation_id)  # through the protocol
        assert [(r.pattern, r.scope) for r in rules] == [("git status", "session")]
    snap = await proc.snapshot()
    assert [c.approval for c in snap.tool_calls] == [Approval.APPROVED] * 2
    # both ran (the second never asked): each has its result
    assert [c.state for c in snap.tool_calls] == [ToolCallState.DONE] * 2
    assert not settings_path(proc.work).exists()


async def test_a_on_a_compound_command_saves_every_part_for_the_project(harness_process, trusted):
    turns = command_turns("git status && npm run test -- -x", "npm run test")
    proc = harness_process(turns)
    trusted(proc.work)  # project rules are written and read only in a trusted folder
    app = proc.app(first_prompt="test")
    async with app.run_test(size=SIZE) as pilot:
        prompt = await asking(app, pilot)
        assert (
            "a saves: commands starting with `git status`, commands starting with "
            "`npm run test`" in prompt.question
        )
        await pilot.press("a", "p")
        await wait_for(lambda: run_settled(app), pilot)
    data = tomllib.loads(settings_path(proc.work).read_text())
    assert data["approvals"]["commands"] == ["git status", "npm run test"]
    snap = await proc.snapshot()
    assert [c.state for c in snap.tool_calls] == [ToolCallState.DONE] * 2  # both ran
    assert snap.rules == ()


async def test_e_denies_with_a_message_the_model_receives(harness_process):
    call = {"id": "c1", "name": "run_command", "arguments": {"command": "rm -rf build"}}
    proc = harness_process([{"tool_calls": [call]}, {"text": "I will use make clean."}])
    (proc.work / "build").mkdir()
    app = proc.app(first_prompt="clean up")
    async with app.run_test(size=SIZE) as pilot:
        prompt = await asking(app, pilot)
        await pilot.press("e", "escape")  # back to the question; the run goes on
        assert app.focused is prompt and "[y] once" in prompt.question
        await pilot.press("e")
        assert app.focused is prompt.query_one("#approval-message")
        await pilot.press(*"use make clean", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        row = str(app.query_one(ToolCallLine).render())
        assert "and said: use make clean" in row  # the row shows what was said
    snap = await proc.snapshot()
    user_texts = [e.text for e in snap.entries if e.kind == "user"]
    assert user_texts == ["clean up"]  # the message was not sent as a prompt
    told = [m for m in proc.requests[1].body["messages"] if m["role"] == "tool"]
    assert "the user denied run_command and said: use make clean" in told[0]["content"]
    assert (proc.work / "build").is_dir()  # denied: never run


async def test_the_diff_shows_in_the_prompt_and_then_in_the_row(harness_process):
    args = {"path": "src/config.py", "old_text": "return 1", "new_text": "return 2"}
    call = {"id": "c1", "name": "edit_file", "arguments": args}
    proc = harness_process([{"tool_calls": [call]}, {"text": "ok"}])
    (proc.work / "src").mkdir()
    (proc.work / "src" / "config.py").write_text("def f():\n    return 1\n")
    app = proc.app(first_prompt="edit")
    async with app.run_test(size=SIZE) as pilot:
        prompt = await asking(app, pilot)
        shown = str(prompt.query_one("#approval-diff-text").render())
        assert "-    return 1\n+    return 2" in shown
        assert "a saves: edits under src/" in prompt.question
        await pilot.press("y")
        await wait_for(lambda: run_settled(app), pilot)
        row = str(app.query_one(ToolCallLine).render())
        assert "--- a/src/config.py" in row and "+    return 2" in row
    assert (proc.work / "src" / "config.py").read_text() == "def f():\n    return 2\n"


async def test_o_and_w_run_a_command_outside_the_sandbox_or_with_network_once(harness_process):
    """`o`: this command outside the sandbox; `w`: this command with the network. Each
    is committed with the approval and reaches the real toolbox for that call only:
    each command says which network interfaces it sees and tries a write outside the
    workspace (where the sandbox walls are here to be seen)."""
    from tools.sandbox import probe

    proc = harness_process([])
    out = proc.tmp_path / "out"
    out.mkdir()
    check = 'echo net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\\n" ,); '
    calls = [
        {"id": f"c{i}", "name": "run_command",
         "arguments": {"command": f"{check}touch {out}/{mark} && echo wrote || echo refused"}}
        for i, mark in enumerate(("network", "outside", "plain"))
    ]  # fmt: skip
    proc.add_turns(*({"tool_calls": [call]} for call in calls), {"text": "Done."})
    app = proc.app(first_prompt="go")
    async with app.run_test(size=SIZE) as pilot:
        prompt = await asking(app, pilot, with_rule=False)
        assert "[o] outside the sandbox once" in prompt.question
        assert "[w] with network once" in prompt.question
        for done, key in enumerate("wo", start=1):
            await pilot.press(key)
            # (each time shown and focused again: a key before the focus moves is typed)
            await wait_for(lambda done=done: _asking(app, prompt) and ran(app) == done, pilot)
        await pilot.press("y")
        await wait_for(lambda: run_settled(app), pilot)
    snap = await proc.snapshot()
    assert [(c.review or {}).get("sandbox") for c in snap.tool_calls] == [
        "network",
        "outside",
        None,
    ]
    support = probe()
    if support.landlock and support.namespace:  # the walls are here: each call's effect
        said = [e.text for e in snap.entries if e.kind == "tool_result"]
        seen = [line for text in said for line in text.splitlines() if line.startswith("net=")]
        assert seen[0] != "net=lo," and seen[1] != "net=lo," and seen[2] == "net=lo,", seen
        assert sorted(p.name for p in out.iterdir()) == ["outside"]


def ran(app: BastionApp) -> int:
    """How many of the view's tool calls are done."""
    return sum(c.state == "done" for c in app.view.tool_calls)


def _asking(app: BastionApp, prompt: ApprovalPrompt) -> bool:
    return prompt.has_class("-shown") and app.focused is prompt
