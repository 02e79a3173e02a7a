"""Approval answers: always-allow saves rules (session in the store, project in the
file), rules let calls run without asking, a denial's message reaches the model,
writes and edits carry their diff, `.bastion/settings.toml` is never written."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path

import pytest

from runtime.config.settings import add_project_rules, dump_toml, load_project_rules, settings_path
from runtime.model.errors import ConfigError, NotPending
from runtime.model.llm import ToolCall
from runtime.model.rules import BadRule, Rule, RuleKind, Scope
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness, until_awaiting_approval

pytestmark = pytest.mark.usefixtures("store_kind")


def tool_turn(name: str, args: dict[str, object], call_id: str = "call_1") -> ScriptedTurn:
    return ScriptedTurn(tool_calls=(ToolCall(call_id, name, json.dumps(args)),))


def cmd_turn(text: str, call_id: str = "call_1") -> ScriptedTurn:
    return tool_turn("run_command", {"command": text}, call_id)


async def start(tmp_path, turns, toolbox=None, *, interactive=True, allow=(), harness=None):
    provider = ScriptedProvider(turns)
    harness = harness or await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "ask"}
    )
    await harness.drive(conv.id, interactive=interactive, allow=allow)
    return harness, conv, provider


async def answer_pending(harness, conv_id, **kwargs):
    snap = await until_awaiting_approval(harness, conv_id)
    pending = [c for c in snap.tool_calls if c.approval == "pending"]
    return await harness.respond(conv_id, pending[0].id, **kwargs), pending[0]


async def test_always_saves_a_session_rule_that_later_calls_use(tmp_path):
    toolbox = RecordingToolbox()
    turns = [
        cmd_turn("git status -s"),
        cmd_turn("git status --porcelain", "call_2"),
        ScriptedTurn(text="done"),
    ]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "status twice")
    snap = await until_awaiting_approval(harness, conv.id)
    call = snap.tool_calls[0]
    proposed = await harness.proposed_rules(conv.id, call.id)
    assert proposed == (Rule(RuleKind.COMMAND, "git status", Scope.SESSION),)
    saved = await harness.respond(conv.id, call.id, True, always="session")
    assert saved == proposed
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed" and len(toolbox.calls) == 2
    snap = await harness.store.snapshot(conv.id)
    first, second = snap.tool_calls
    assert first.approval == second.approval == "approved"
    assert second.review == {"allowed_by": [proposed[0].to_dict()]}  # never asked
    assert snap.rules == proposed
    view = await harness.snapshot(conv.id)
    assert view.rules == proposed
    await harness.close()


async def test_session_rules_survive_a_restart(tmp_path):
    toolbox = RecordingToolbox()
    harness, conv, _ = await start(
        tmp_path, [cmd_turn("make test -j4"), ScriptedTurn(text="ok")], toolbox
    )
    item = await harness.submit(conv.id, "test")
    await answer_pending(harness, conv.id, approve=True, always="session")
    await harness.wait(item.id, conv.id)
    await harness.close()

    provider = ScriptedProvider([cmd_turn("make test"), ScriptedTurn(text="again")])
    reopened = await open_harness(tmp_path, provider, toolbox)
    await reopened.drive(conv.id)
    assert [r.pattern for r in await reopened.rules(conv.id)] == ["make test"]
    item = await reopened.submit(conv.id, "again")
    run = await reopened.wait(item.id, conv.id)
    assert run.state == "completed" and len(toolbox.calls) == 2
    await reopened.close()


async def test_compound_command_saves_one_rule_per_part(tmp_path):
    toolbox = RecordingToolbox()
    turns = [cmd_turn("git status && npm run test -- -x"), ScriptedTurn(text="ok")]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "go")
    saved, _ = await answer_pending(harness, conv.id, approve=True, always="session")
    assert [r.pattern for r in saved] == ["git status", "npm run test"]
    await harness.wait(item.id, conv.id)
    await harness.close()


async def test_always_refused_for_a_command_no_rule_can_cover(tmp_path):
    toolbox = RecordingToolbox()
    turns = [cmd_turn("ls $(pwd)"), ScriptedTurn(text="ok")]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "go")
    snap = await until_awaiting_approval(harness, conv.id)
    call = snap.tool_calls[0]
    assert await harness.proposed_rules(conv.id, call.id) == ()
    with pytest.raises(BadRule, match="no rule can cover"):
        await harness.respond(conv.id, call.id, True, always="session")
    still = await harness.store.tool_call(call.id)
    assert still is not None and still.approval == "pending"  # nothing changed
    await harness.respond(conv.id, call.id, True)
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    await harness.close()


async def test_deny_with_a_message_reaches_the_model(tmp_path):
    toolbox = RecordingToolbox()
    turns = [cmd_turn("rm -rf build"), ScriptedTurn(text="ok, I will not")]
    harness, conv, provider = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "clean")
    await answer_pending(harness, conv.id, approve=False, message="use make clean instead")
    await harness.wait(item.id, conv.id)
    tool_message = provider.requests[1].messages[-1]
    assert tool_message.role == "tool"
    assert "use make clean instead" in str(tool_message.content)
    assert toolbox.calls == []
    with pytest.raises(BadRule):
        await harness.respond(conv.id, "x", True, message="no")
    with pytest.raises(NotPending):
        await harness.respond(conv.id, "x", False, message="no")
    await harness.close()


async def test_project_rule_goes_to_the_settings_file(tmp_path, trusted):
    trusted(tmp_path)
    toolbox = RecordingToolbox()
    turns = [tool_turn("write_file", {"path": "src/app/main.py"}), ScriptedTurn(text="ok")]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "write")
    saved, _ = await answer_pending(harness, conv.id, approve=True, always="project")
    assert saved == (Rule(RuleKind.EDITS, "src/app", Scope.PROJECT),)
    await harness.wait(item.id, conv.id)
    data = tomllib.loads(settings_path(tmp_path).read_text())
    assert data == {"approvals": {"commands": [], "edits": ["src/app"]}}
    assert (await harness.store.snapshot(conv.id)).rules == ()  # not a session rule
    await harness.close()


async def test_an_untrusted_folder_gets_no_project_rule_and_reads_none(tmp_path):
    """Issue 23: a project rule is refused (one line) until the folder is trusted, and a
    settings file the repository ships is not read: its `git log` rule still asks."""
    add_project_rules(tmp_path, [Rule(RuleKind.COMMAND, "git log")])
    toolbox = RecordingToolbox()
    turns = [cmd_turn("git log -1"), ScriptedTurn(text="a")]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    item = await harness.submit(conv.id, "log")
    with pytest.raises(BadRule, match="not trusted"):
        await answer_pending(harness, conv.id, approve=True, always="project")
    assert await harness.rules(conv.id) == ()
    await answer_pending(harness, conv.id, approve=True)  # still pending: it asked
    await harness.wait(item.id, conv.id)
    assert len(toolbox.calls) == 1
    await harness.close()


async def test_project_rules_are_read_at_start_and_when_the_file_changes(tmp_path, trusted):
    trusted(tmp_path)
    toolbox = RecordingToolbox()
    add_project_rules(tmp_path, [Rule(RuleKind.COMMAND, "git log")])
    turns = [
        cmd_turn("git log -1"),
        ScriptedTurn(text="a"),
        cmd_turn("git diff"),
        ScriptedTurn(text="b"),
    ]
    harness, conv, _ = await start(tmp_path, turns, toolbox)
    first = await harness.submit(conv.id, "log")
    assert (await harness.wait(first.id, conv.id)).state == "completed"  # never asked
    add_project_rules(tmp_path, [Rule(RuleKind.COMMAND, "git diff")])
    second = await harness.submit(conv.id, "diff")
    assert (await harness.wait(second.id, conv.id)).state == "completed"
    assert len(toolbox.calls) == 2
    await harness.close()


def test_project_file_round_trip_keeps_other_content(tmp_path):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text('title = "x"\n[approvals]\ncommands = ["ls"]\nnote = "mine"\n[other]\nn = 3\n')
    rules = add_project_rules(
        tmp_path, [Rule(RuleKind.COMMAND, "git status"), Rule(RuleKind.EDITS, "")]
    )
    assert [r.pattern for r in rules] == ["ls", "git status", ""]
    data = tomllib.loads(path.read_text())
    assert data == {
        "title": "x",
        "approvals": {"commands": ["ls", "git status"], "note": "mine", "edits": ["."]},
        "other": {"n": 3},
    }
    assert load_project_rules(tmp_path) == rules
    assert list(path.parent.glob(".settings.*")) == []  # no temp file left


def test_broken_project_file_is_a_clear_error(tmp_path):
    path = settings_path(tmp_path)
    path.parent.mkdir()
    path.write_text("[approvals]\ncommands = 3\n")
    with pytest.raises(ConfigError, match=r"approvals\.commands must be a list"):
        load_project_rules(tmp_path)
    path.write_text("[approvals\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        add_project_rules(tmp_path, [Rule(RuleKind.COMMAND, "ls")])
    assert path.read_text() == "[approvals\n"  # nothing changed


def test_dump_toml_escapes() -> None:
    data = {"a b": 'q"\\\n', "t": {"x": [1, 2.5, True]}}
    assert tomllib.loads(dump_toml(data)) == data


async def test_print_mode_allow_runs_what_would_be_refused(tmp_path):
    toolbox = RecordingToolbox()
    turns = [cmd_turn("git status -s"), cmd_turn("git push", "call_2"), ScriptedTurn(text="ok")]
    harness, conv, _ = await start(
        tmp_path, turns, toolbox, interactive=False, allow=["git status"]
    )
    item = await harness.submit(conv.id, "go")
    await harness.wait(item.id, conv.id)
    assert toolbox.calls == [("run_command", {"command": "git status -s"})]
    snap = await harness.store.snapshot(conv.id)
    assert [c.approval for c in snap.tool_calls] == ["approved", "denied"]
    assert snap.tool_calls[0].review == {
        "allowed_by": [{"kind": "command", "pattern": "git status", "scope": "invocation"}]
    }
    assert snap.rules == ()  # an invocation's rule is not stored
    await harness.close()


async def test_bad_allow_is_refused_before_anything_runs(tmp_path):
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    with pytest.raises(BadRule, match="not a plain command prefix"):
        await harness.drive(conv.id, allow=["git status && rm"])
    await harness.close()


def workspace(tmp_path: Path) -> WorkspaceToolbox:
    return WorkspaceToolbox(str(tmp_path), tmp_path / ".artifacts")


async def test_write_and_edit_carry_their_diff_across_a_restart(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    turns = [
        tool_turn("edit_file", {"path": "a.txt", "old_text": "two", "new_text": "TWO"}),
        ScriptedTurn(text="ok"),
    ]
    harness, conv, _ = await start(tmp_path, turns, workspace(tmp_path))
    item = await harness.submit(conv.id, "edit")
    snap = await until_awaiting_approval(harness, conv.id)
    diff = snap.tool_calls[0].review["diff"]
    assert "-two\n+TWO\n" in diff and diff.startswith("--- a/a.txt\n+++ b/a.txt\n")
    await harness.close()

    reopened = await open_harness(
        tmp_path, ScriptedProvider([ScriptedTurn(text="ok")]), workspace(tmp_path)
    )
    view = await reopened.snapshot(conv.id)
    assert view.tool_calls[0].review["diff"] == diff
    await reopened.drive(conv.id)
    await reopened.respond(conv.id, view.tool_calls[0].id, True)
    await reopened.wait(item.id, conv.id)
    assert (tmp_path / "a.txt").read_text() == "one\nTWO\n"
    await reopened.close()


async def test_a_huge_diff_is_cut_with_a_note(tmp_path):
    content = "".join(f"line {i}\n" for i in range(5000))
    turns = [
        tool_turn("write_file", {"path": "big.txt", "content": content}),
        ScriptedTurn(text="ok"),
    ]
    harness, conv, _ = await start(tmp_path, turns, workspace(tmp_path))
    await harness.submit(conv.id, "write")
    snap = await until_awaiting_approval(harness, conv.id)
    review = snap.tool_calls[0].review
    assert review["diff"].startswith("--- /dev/null\n+++ b/big.txt\n")
    assert len(review["diff"].splitlines()) == 400
    assert review["note"] == "diff cut: 4603 of 5003 lines not shown"
    await harness.close()


@pytest.mark.parametrize("mode", ["ask", "full-auto"])
async def test_the_model_cannot_write_the_settings_file(tmp_path, mode):
    turns = [
        tool_turn("write_file", {"path": ".bastion/settings.toml", "content": "[approvals]\n"}),
        tool_turn(
            "edit_file", {"path": ".Bastion/settings.toml", "old_text": "a", "new_text": "b"}, "c2"
        ),
        ScriptedTurn(text="ok"),
    ]
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, workspace(tmp_path))
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": mode}
    )
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "go")
    run = await asyncio.wait_for(harness.wait(item.id, conv.id), 10)
    assert run.state == "completed"  # nothing asked
    assert not settings_path(tmp_path).exists()
    for request in provider.requests[1:]:
        text = str(request.messages[-1].content)
        assert "REFUSED FORBIDDEN: .bastion/ holds the user's own bastion settings" in text
    await harness.close()


async def test_a_write_over_an_existing_file_without_overwrite_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    turns = [tool_turn("write_file", {"path": "a.txt", "content": "y\n"}), ScriptedTurn(text="ok")]
    harness, conv, _ = await start(tmp_path, turns, workspace(tmp_path))
    await harness.submit(conv.id, "write")
    snap = await until_awaiting_approval(harness, conv.id)
    assert snap.tool_calls[0].review == {
        "diff": "",
        "note": "a.txt exists and overwrite is not set: the write will be refused",
    }
    await harness.close()


async def test_the_view_follows_session_rules_through_the_reducer(tmp_path):
    from runtime.model.events import RulesUpdated
    from runtime.model.views import reduce

    toolbox = RecordingToolbox()
    harness, conv, _ = await start(
        tmp_path, [cmd_turn("git log -3"), ScriptedTurn(text="ok")], toolbox
    )
    sub = harness.subscribe(conv.id)
    item = await harness.submit(conv.id, "log")
    view = await harness.snapshot(conv.id)
    assert view.rules == ()
    await answer_pending(harness, conv.id, approve=True, always="session")
    await harness.wait(item.id, conv.id)
    events = [e for e in sub.pending() if getattr(e, "version", 0) > view.version]
    sub.close()
    assert any(isinstance(e, RulesUpdated) for e in events)
    for event in events:
        view = reduce(view, event)
    assert view.rules == (Rule(RuleKind.COMMAND, "git log", Scope.SESSION),)
    assert view.rules == (await harness.snapshot(conv.id)).rules
    await harness.close()
