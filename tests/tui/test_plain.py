"""`bastion --plain`: line mode reading prompts and approvals, printing what the view says."""

from __future__ import annotations

import asyncio
import io
import json

from rich.console import Console

from runtime.config.rules import edits_rule
from runtime.config.settings import add_project_rules
from runtime.model.llm import ToolCall
from runtime.model.records import Approval, EntryKind, EntryStatus, RunState
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import open_harness
from tests.tui.conftest import HangingProvider, client_of, open_driven
from tui.plain import LineMode


class Keyboard:
    """Answers `read_line`/`ask` from a script; EOFError (Ctrl+D) when it runs out."""

    def __init__(self, *lines: str | type[BaseException]) -> None:
        self.lines = list(lines)
        self.asked: list[str] = []

    async def __call__(self, prompt: str) -> str:
        self.asked.append(prompt)
        await asyncio.sleep(0)  # (yield to the loop, as reading a terminal's line does)
        if not self.lines:
            raise EOFError
        line = self.lines.pop(0)
        if isinstance(line, type):
            raise line()
        return line


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    from tui.plain import line_console

    return line_console(file=out, width=80, force_terminal=False, color_system=None), out


async def test_a_line_is_sent_and_the_answer_printed_as_markdown(tmp_path):
    turn = ScriptedTurn(text="Use **tabs**:\n\n- one\n- two", chunk_size=4)
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([turn]))
    con, out = console()
    keyboard = Keyboard("which indent?")
    try:
        code = await LineMode(await client_of(harness), conv_id, con, keyboard).loop()
        assert code == 0
        text = out.getvalue()
        assert "Use tabs:" in text and "• one" in text and "• two" in text
        assert "**" not in text  # rendered, not raw
        assert keyboard.asked == ["› ", "› "]  # the prompt again after the answer, then Ctrl+D
        snap = await harness.store.snapshot(conv_id)
        assert [(e.kind, e.text) for e in snap.entries] == [
            (EntryKind.USER, "which indent?"),
            (EntryKind.ASSISTANT, turn.text),
        ]
    finally:
        await harness.close()


async def test_the_command_line_prompt_goes_first_and_is_echoed(tmp_path):
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([ScriptedTurn(text="Hi.")]))
    con, out = console()
    try:
        assert (
            await LineMode(await client_of(harness), conv_id, con, Keyboard()).loop(
                first_prompt="hello"
            )
            == 0
        )
        text = out.getvalue()
        assert text.index("› hello") < text.index("Hi.")
    finally:
        await harness.close()


async def test_tool_calls_are_dim_lines_and_approvals_are_asked(tmp_path, toolbox):
    args = json.dumps({"path": "a.txt", "content": "x"})
    turns = [
        ScriptedTurn(tool_calls=(ToolCall("c1", "write_file", args),)),
        ScriptedTurn(text="Written."),
    ]
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    keyboard, answers = Keyboard("write it"), Keyboard("y")
    try:
        await LineMode(await client_of(harness), conv_id, con, keyboard, ask=answers).loop()
        assert answers.asked == ["Allow write_file a.txt? [y/a/n/e] "]
        assert "a = always allow edits anywhere in the workspace" in out.getvalue()
        text = out.getvalue()
        assert "· write_file a.txt" in text
        assert "└ write_file ok" in text and "Written." in text
        assert toolbox.calls == [("write_file", {"path": "a.txt", "content": "x"})]
        snap = await harness.store.snapshot(conv_id)
        assert snap.tool_calls[0].approval == Approval.APPROVED
    finally:
        await harness.close()


async def test_no_denies_the_call(tmp_path, toolbox):
    args = json.dumps({"path": "a.txt", "content": "x"})
    turns = [
        ScriptedTurn(tool_calls=(ToolCall("c1", "write_file", args),)),
        ScriptedTurn(text="OK."),
    ]
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    try:
        await LineMode(
            await client_of(harness), conv_id, con, Keyboard("write"), ask=Keyboard("n")
        ).loop()
        assert toolbox.calls == []
        assert "denied" in out.getvalue()
        snap = await harness.store.snapshot(conv_id)
        assert snap.tool_calls[0].approval == Approval.DENIED
    finally:
        await harness.close()


async def test_ctrl_c_at_the_prompt_exits(tmp_path):
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([]))
    con, _ = console()
    try:
        assert (
            await LineMode(
                await client_of(harness), conv_id, con, Keyboard(KeyboardInterrupt)
            ).loop()
            == 0
        )
    finally:
        await harness.close()


async def test_ctrl_c_during_a_run_interrupts_it(tmp_path):
    import os
    import signal

    provider = HangingProvider("Thinking about")
    harness, conv_id = await open_driven(tmp_path, provider)
    con, out = console()
    try:
        mode = LineMode(await client_of(harness), conv_id, con, Keyboard("go"))
        task = asyncio.create_task(mode.loop())
        await asyncio.wait_for(provider.streamed.wait(), 30)
        # It follows the run (and so takes Ctrl+C) once its view has the run.
        await until(lambda: mode.view is not None and mode.view.active_run, "the run followed")
        os.kill(os.getpid(), signal.SIGINT)
        assert await asyncio.wait_for(task, 5) == 0
        assert "interrupted" in out.getvalue()
        snap = await harness.store.snapshot(conv_id)
        assert snap.runs[-1].state == RunState.INTERRUPTED
        assert snap.entries[-1].status == EntryStatus.INTERRUPTED
    finally:
        await harness.close()


def command_turns(*commands: str) -> list[ScriptedTurn]:
    turns = [
        ScriptedTurn(tool_calls=(ToolCall(f"c{i}", "run_command", json.dumps({"command": c})),))
        for i, c in enumerate(commands)
    ]
    return [*turns, ScriptedTurn(text="Done.")]


async def test_always_saves_the_shown_rule_and_later_calls_do_not_ask(tmp_path, toolbox):
    turns = command_turns("git status && git diff --stat", "git diff HEAD")
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    answers = Keyboard("x", "a", "q", "s")
    try:
        await LineMode(await client_of(harness), conv_id, con, Keyboard("look"), ask=answers).loop()
        text = out.getvalue()
        assert (
            "a = always allow commands starting with `git status`, commands starting with `git diff`"
            in text
        )
        assert "answer one of [y/a/n/e/o/w]" in text  # "x" asked again
        assert "saved to this session: commands starting with `git status`" in text
        assert answers.asked[-1] == "save for this [s]ession or the [p]roject? "
        assert len(toolbox.calls) == 2  # the second call was never asked
        assert [r.pattern for r in await harness.rules(conv_id)] == ["git status", "git diff"]
    finally:
        await harness.close()


async def test_e_denies_with_a_message_the_model_receives(tmp_path, toolbox):
    provider = ScriptedProvider(command_turns("rm -rf build"))
    harness, conv_id = await open_driven(tmp_path, provider, toolbox)
    con, _ = console()
    answers = Keyboard("e", "run make clean instead")
    try:
        await LineMode(
            await client_of(harness), conv_id, con, Keyboard("clean"), ask=answers
        ).loop()
        assert answers.asked[-1] == "tell the model: "
        assert toolbox.calls == []
        told = provider.requests[1].messages[-1]
        assert told.role == "tool" and "run make clean instead" in str(told.content)
    finally:
        await harness.close()


async def test_a_write_shows_its_diff(tmp_path):
    from runtime.run.toolbox import WorkspaceToolbox

    (tmp_path / "a.txt").write_text("one\ntwo\n")
    args = json.dumps({"path": "a.txt", "old_text": "two", "new_text": "three"})
    turns = [ScriptedTurn(tool_calls=(ToolCall("c1", "edit_file", args),)), ScriptedTurn(text="ok")]
    box = WorkspaceToolbox(str(tmp_path), tmp_path / ".artifacts")
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), box)
    con, out = console()
    try:
        await LineMode(
            await client_of(harness), conv_id, con, Keyboard("edit"), ask=Keyboard("y")
        ).loop()
        text = out.getvalue()
        assert "  --- a/a.txt\n  +++ b/a.txt\n  @@ -1,2 +1,2 @@\n   one\n  -two\n  +three\n" in text
        assert (tmp_path / "a.txt").read_text() == "one\nthree\n"
    finally:
        await harness.close()


async def test_a_call_that_ran_without_asking_shows_its_rule_and_diff(tmp_path, trusted):
    from runtime.run.toolbox import WorkspaceToolbox

    trusted(tmp_path)  # its project rule applies only in a trusted folder
    args = json.dumps({"path": "docs/a.md", "content": "# A\n"})
    turns = [
        ScriptedTurn(tool_calls=(ToolCall("c1", "write_file", args),)),
        ScriptedTurn(text="ok"),
    ]
    box = WorkspaceToolbox(str(tmp_path), tmp_path / ".artifacts")
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, box)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "scripted/x", "approval_mode": "ask"}
    )
    add_project_rules(tmp_path, [edits_rule("docs")])
    await harness.drive(conv.id)
    con, out = console()
    try:
        await LineMode(
            await client_of(harness), conv.id, con, Keyboard("write"), ask=Keyboard()
        ).loop()
        text = out.getvalue()
        assert "    allowed by edits under docs/\n" in text
        assert "  --- /dev/null\n  +++ b/docs/a.md\n  @@ -0,0 +1 @@\n  +# A\n" in text
    finally:
        await harness.close()


async def read_typed(data: str) -> str:
    """What one `prompt_session().prompt_async` returns when the terminal sends `data`."""
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from tui.plain import prompt_session

    with create_pipe_input() as pipe:
        session = prompt_session(input=pipe, output=DummyOutput())
        pipe.send_text(data)
        return str(await asyncio.wait_for(session.prompt_async("› "), 5))


async def test_three_pasted_lines_are_one_prompt_with_or_without_brackets():
    assert await read_typed("\x1b[200~one\ntwo\nthree\x1b[201~\r") == "one\ntwo\nthree"
    # Without bracketed paste the lines arrive as Enter presses, all at once.
    assert await read_typed("one\rtwo\rthree\r") == "one\ntwo\nthree"


async def test_enter_sends_and_ctrl_j_breaks_the_line():
    assert await read_typed("hello\r") == "hello"
    assert await read_typed("a\nb\r") == "a\nb"  # \n is Ctrl+J
    assert await read_typed("a\x1b\rb\r") == "a\nb"  # Alt+Enter


async def test_a_pasted_block_is_one_run(tmp_path):
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider([ScriptedTurn(text="ok")]))
    con, _ = console()
    pasted = await read_typed("one\rtwo\rthree\r")
    try:
        assert await LineMode(await client_of(harness), conv_id, con, Keyboard(pasted)).loop() == 0
        snap = await harness.store.snapshot(conv_id)
        assert [(e.kind, e.text) for e in snap.entries] == [
            (EntryKind.USER, "one\ntwo\nthree"),
            (EntryKind.ASSISTANT, "ok"),
        ]
        assert len(snap.runs) == 1
    finally:
        await harness.close()


async def test_o_runs_a_command_outside_the_sandbox_once(tmp_path, toolbox):
    """`o` approves this command to run outside the sandbox: the answer is committed with
    the approval (review["sandbox"]) and the toolbox is asked to run it so."""
    turns = command_turns("touch ~/x", "touch ~/y")
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    try:
        await LineMode(
            await client_of(harness), conv_id, con, Keyboard("look"), ask=Keyboard("o", "y")
        ).loop()
        assert "o = outside the sandbox once, w = with network once" in out.getvalue()
        calls = (await harness.snapshot(conv_id)).tool_calls
        assert [(c.review or {}).get("sandbox") for c in calls] == ["outside", None]
        assert toolbox.sandboxes == ["outside", None]
    finally:
        await harness.close()


async def test_results_of_calls_listed_together_name_their_call(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    from runtime.run.toolbox import WorkspaceToolbox

    reads = tuple(
        ToolCall(f"c{i}", "read_file", json.dumps({"path": f"{p}.txt"})) for i, p in enumerate("ab")
    )
    turns = [ScriptedTurn(tool_calls=reads), ScriptedTurn(text="Both read.")]
    toolbox = WorkspaceToolbox(str(tmp_path), tmp_path / "artifacts")
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    try:
        assert (
            await LineMode(await client_of(harness), conv_id, con, Keyboard("read both")).loop()
            == 0
        )
        lines = out.getvalue().splitlines()
        listed = [i for i, line in enumerate(lines) if line.startswith("· read_file")]
        results = [line for line in lines if line.startswith("  └")]
        assert len(listed) == 2 and listed[1] == listed[0] + 1  # both listed, then results
        assert len(results) == 2
        # a's result is never under a's own line: it says whose it is. b's is either
        # right under b's line (b finished first) or says whose it is too.
        assert any(r.startswith("  └ read_file a.txt: ") for r in results), results
        first = lines[listed[1] + 1]
        if first.startswith("  └ read_file a.txt: "):
            assert lines[listed[1] + 2].startswith("  └ read_file b.txt: "), lines
        else:
            assert first.startswith("  └ ") and ("beta" in first or "b.txt" in first), lines
    finally:
        await harness.close()


async def test_the_todo_list_is_printed_when_it_changes(tmp_path, toolbox):
    def todo(call_id: str, statuses: tuple[str, str]) -> ToolCall:
        items = [
            {"content": c, "status": s} for c, s in zip(("Plan it", "Do it"), statuses, strict=True)
        ]
        return ToolCall(call_id, "todo", json.dumps({"todos": items}))

    turns = [
        ScriptedTurn(tool_calls=(todo("t1", ("done", "in_progress")),)),
        ScriptedTurn(tool_calls=(todo("t2", ("done", "in_progress")),)),  # the same list
        ScriptedTurn(tool_calls=(todo("t3", ("done", "done")),)),
        ScriptedTurn(text="Finished."),
    ]
    harness, conv_id = await open_driven(tmp_path, ScriptedProvider(turns), toolbox)
    con, out = console()
    try:
        assert await LineMode(await client_of(harness), conv_id, con, Keyboard("go")).loop() == 0
        text = out.getvalue()
        assert text.count("plan · ") == 2  # printed when it changed, not for the repeat
        first = text.index("plan · 1/2 done\n  ✓ Plan it\n  ▸ Do it")
        assert (
            first < text.index("plan · 2/2 done\n  ✓ Plan it\n  ✓ Do it") < text.index("Finished.")
        )
    finally:
        await harness.close()


async def test_a_commands_exit_code_and_the_end_of_its_output_are_shown(tmp_path):
    """Issue 38: `--plain` shows what a command did: its exit code and duration, and the
    last lines of its output (with how many earlier ones it left out), not `$ cmd` alone;
    another tool's row says how many lines its result has beyond the first."""
    from runtime.run.toolbox import WorkspaceToolbox

    script = "import sys\nfor i in range(25): print('line', i)\nsys.exit(3)\n"
    (tmp_path / "count.py").write_text(script)
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n")
    run = ToolCall("c1", "run_command", json.dumps({"command": "python3 count.py"}))
    read = ToolCall("c2", "read_file", json.dumps({"path": "notes.txt"}))
    turns = [ScriptedTurn(tool_calls=(run,)), ScriptedTurn(tool_calls=(read,)),
             ScriptedTurn(text="Counted.")]  # fmt: skip
    toolbox = WorkspaceToolbox(str(tmp_path), tmp_path / "artifacts")
    harness, conv_id = await open_driven(
        tmp_path, ScriptedProvider(turns), toolbox, approval_mode="full-auto"
    )
    con, out = console()
    try:
        await LineMode(await client_of(harness), conv_id, con, Keyboard("count")).loop()
        lines = out.getvalue().splitlines()
        at = lines.index("  └ $ python3 count.py")
        assert lines[at + 1].startswith("    [exit 3, ")
        assert lines[at + 2] == "    … 15 earlier lines"
        assert lines[at + 3 : at + 13] == [f"    line {i}" for i in range(15, 25)]
        assert any(line.startswith("  └ ") and "(+" in line for line in lines[at + 13 :]), lines
    finally:
        await harness.close()


async def test_a_resumed_session_replays_each_answers_calls_under_it(tmp_path, toolbox):
    """Issue 38: `--plain -r` prints a stored session as it happened: each answer's
    tool calls under it and a failed run's end right after that run, not all the
    answers first and the calls after them."""
    from runtime.model.llm import ProviderError

    read = ToolCall("r1", "read_file", json.dumps({"path": "a.txt"}))
    failure = ProviderError("the model is down", provider="scripted", retryable=False)
    provider = ScriptedProvider(
        [ScriptedTurn(text="Reading.", tool_calls=(read,)), ScriptedTurn(text="It says hi."),
         ScriptedTurn(error=failure), ScriptedTurn(text="Third.")]
    )  # fmt: skip
    harness, conv_id = await open_driven(tmp_path, provider, toolbox, approval_mode="full-auto")
    con, out = console()
    try:
        for prompt in ("first", "second", "third"):
            item = await harness.submit(conv_id, prompt)
            await harness.wait(item.id, conv_id, poll=0.05)
        await LineMode(await client_of(harness), conv_id, con, Keyboard()).loop()
    finally:
        await harness.close()
    text = out.getvalue()
    order = ["› first", "Reading.", "· read_file a.txt", "└", "It says hi.", "› second",
             "✗ failed: the model is down", "› third", "Third."]  # fmt: skip
    assert all(part in text for part in order), text
    at = [text.index(part) for part in order]
    assert at == sorted(at), text
