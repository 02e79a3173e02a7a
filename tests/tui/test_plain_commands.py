"""`bastion --plain` runs the app's slash commands (one registry, `tui.slash`): each
works there or says in one line that it needs the app; an unknown command, or a
command typed after a draft /rewind handed back, is never sent to the model."""

from __future__ import annotations

import json
import subprocess
import sys

from runtime.model.llm import ToolCall
from runtime.run.toolbox import WorkspaceToolbox
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.tui.conftest import MODEL, client_of, open_driven
from tests.tui.test_plain import Keyboard, console
from tui.plain import LineMode


async def test_commands_run_here_and_nothing_reaches_the_model(tmp_path):
    provider = ScriptedProvider([])
    harness, conv_id = await open_driven(tmp_path, provider)
    con, out = console()
    keyboard = Keyboard("/help", "/frobnicate", "/theme", "/mode auto-edit", "/cost", "/quit")
    try:
        code = await LineMode(await client_of(harness), conv_id, con, keyboard).loop()
        text = out.getvalue()
        assert code == 0
        assert keyboard.lines == [] and len(keyboard.asked) == 6  # /quit ended it
        assert "/model [NAME]" in text and "/theme [NAME]" in text and "(the app only)" in text
        assert "unknown command /frobnicate" in text
        assert text.count("/help lists the commands") == 1
        assert "/theme needs the app: run `bastion` without --plain" in text
        assert "approval mode: auto-edit" in text
        assert (await harness.session_settings(conv_id)).approval_mode == "auto-edit"
        assert "no usage yet" in text
        assert "$accent" not in text and "[b]" not in text
        assert provider.requests == []
        assert (await harness.snapshot(conv_id)).entries == ()
    finally:
        await harness.close()


async def test_rewind_then_restore_typed_after_the_draft_runs_restore(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    write = ToolCall("w1", "write_file", json.dumps({"path": "notes.txt", "content": "hi\n"}))
    provider = ScriptedProvider(
        [ScriptedTurn(text="Writing.", tool_calls=(write,)), ScriptedTurn(text="Wrote it.")]
    )
    harness = await open_harness(work, provider, WorkspaceToolbox(str(work), tmp_path / "art"))
    conv = await harness.create_conversation(
        str(work), settings={"model": MODEL, "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id, interactive=True)
    con, out = console()
    # The prompt after /rewind starts with the message; the user types /restore after it.
    keyboard = Keyboard("write the notes", "/rewind 1", "write the notes/restore")
    try:
        mode = LineMode(await client_of(harness), conv.id, con, keyboard)
        assert await mode.loop() == 0
        text = out.getvalue()
        assert "rewound: before message 1" in text and "removed notes.txt" in text
        assert not (work / "notes.txt").exists()
        assert mode.conversation_id != conv.id  # going on in the rewound copy
        assert mode.draft is None and mode.kept_draft == "write the notes"  # offered again
        assert len(provider.requests) == 2  # nothing more was sent
        assert (await harness.snapshot(mode.conversation_id)).entries == ()
    finally:
        await harness.close()


async def test_resume_by_prefix_switches_and_prints_that_transcript(tmp_path):
    provider = ScriptedProvider([ScriptedTurn(text="first answer")])
    harness, first = await open_driven(tmp_path, provider)
    item = await harness.submit(first, "the first question")
    await harness.wait(item.id, first, poll=0.05)
    fresh = await harness.new_session(first)
    short = (await harness.short_ids([first]))[first]
    con, out = console()
    try:
        mode = LineMode(await client_of(harness), fresh.id, con, Keyboard(f"/resume {short}"))
        assert await mode.loop() == 0
        assert mode.conversation_id == first
        assert "the first question" in out.getvalue() and "first answer" in out.getvalue()
    finally:
        await harness.close()


def test_the_command_registry_loads_without_textual():
    code = "import sys, tui.plain_commands, tui.slash; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


async def test_attach_plain_names_where_a_shared_command_works_and_sends_neither(tmp_path):
    """`bastion attach --plain` has its own line commands; the app's (/model, /theme, …)
    and unknown ones are one line each, never sent to the model."""
    import io

    from runtime.ipc.local import local_client
    from tui.attach import AttachLine, Following

    provider = ScriptedProvider([ScriptedTurn(text="to the model")])
    harness, conv_id = await open_driven(tmp_path, provider)
    err = io.StringIO()
    try:
        client = await local_client(harness, owner=False)
        line = AttachLine(Following(client, conv_id, "live"), io.StringIO(), err)
        for typed in ("/model openai/x", "/theme", "/frobnicate"):
            assert await line.handle(typed) is True
        said = err.getvalue().splitlines()
        assert said[0].startswith("/model is the app's: run `bastion attach")
        assert said[1].startswith("/theme is the app's: run `bastion attach")
        assert said[2].startswith("unknown command /frobnicate")
        assert provider.requests == []
        await client.close()
    finally:
        await harness.close()


async def test_attach_plain_replays_calls_and_run_ends_in_order(tmp_path, toolbox):
    """A stored session replayed by `attach --plain`: each answer's tool call under it,
    and a run's end right after that run, not all gathered at the end."""
    import io

    from runtime.ipc.local import local_client
    from runtime.model.llm import ProviderError
    from tui.attach import AttachLine, Following

    read = ToolCall("r1", "read_file", json.dumps({"path": "a.txt"}))
    failure = ProviderError("the model is down", provider="scripted", retryable=False)
    provider = ScriptedProvider(
        [ScriptedTurn(text="Reading.", tool_calls=(read,)), ScriptedTurn(text="It says hi."),
         ScriptedTurn(error=failure), ScriptedTurn(text="Third.")]
    )  # fmt: skip
    harness, conv_id = await open_driven(tmp_path, provider, toolbox, approval_mode="full-auto")
    try:
        for prompt in ("first", "second", "third"):
            item = await harness.submit(conv_id, prompt)
            await harness.wait(item.id, conv_id, poll=0.05)
        out = io.StringIO()
        client = await local_client(harness, owner=False)
        line = AttachLine(Following(client, conv_id, "live"), out, io.StringIO())
        line.render(await harness.snapshot(conv_id))
        await client.close()
    finally:
        await harness.close()
    text = out.getvalue()
    order = ["> first", "Reading.", "⏺ read_file a.txt", "⎿", "It says hi.", "> second",
             "[run failed: the model is down]", "> third", "Third."]  # fmt: skip
    at = [text.index(part) for part in order]
    assert at == sorted(at), text
