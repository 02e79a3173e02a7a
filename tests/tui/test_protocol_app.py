"""The app over the protocol, as `bastion` runs it: every command's arguments and
answers cross the transport (JSON lines, runtime.model.protocol) and come back as the
app expects them.

The harness is the real harness process (tests/tui/process.py), its provider a
loopback server speaking the chat-completions wire format.
"""

from __future__ import annotations

import json

from runtime.model.llm import ToolCall, Usage
from runtime.testing.scripted import ScriptedTurn
from tests.tui.conftest import run_settled, wait_for
from tests.tui.test_slash import run_command, said, status, transcript_text
from tui.widgets import PromptInput


async def test_commands_cross_to_the_harness_and_back(harness_process):
    write = ToolCall("w1", "write_file", json.dumps({"path": "notes.txt", "content": "hi\n"}))
    proc = harness_process(
        [
            ScriptedTurn(text="Writing.", tool_calls=(write,), usage=Usage(1200, 30, cost=0.0012)),
            ScriptedTurn(text="Wrote it.", usage=Usage(10, 2)),  # (the wire reports usage)
            ScriptedTurn(text="In the new one."),
        ]
    )
    work = proc.work
    app = proc.app(approval_mode="full-auto")
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        conv_id = app.conversation_id
        await pilot.press(*"write the notes", "enter")
        await wait_for(lambda: run_settled(app) and (work / "notes.txt").exists(), pilot)
        await run_command(app, pilot, "/cost")
        await wait_for(lambda: "1.2k in, 32 out $0.0012 over 1 run" in said(app), pilot)
        await run_command(app, pilot, "/mode read-only")
        await wait_for(lambda: "read-only" in status(app), pilot)
        await run_command(app, pilot, "/mode full-auto")
        await wait_for(lambda: "full-auto" in status(app), pilot)
        await run_command(app, pilot, "/export json")
        exported = work / f"bastion-{conv_id[:8]}.json"
        await wait_for(exported.exists, pilot)
        texts = [e["text"] for e in json.loads(exported.read_text())["entries"]]
        assert texts[0] == "write the notes" and texts[-1] == "Wrote it."
        await run_command(app, pilot, "/fork")
        await wait_for(lambda: "forked" in said(app), pilot)
        forked = app.conversation_id
        assert forked != conv_id
        await wait_for(lambda: "Wrote it." in transcript_text(app), pilot)
        await run_command(app, pilot, "/rewind 1")
        await wait_for(lambda: "rewound" in said(app), pilot)
        assert app.query_one(PromptInput).text == "write the notes"
        await run_command(app, pilot, "/restore")
        await wait_for(lambda: "removed notes.txt" in said(app), pilot)
        assert not (work / "notes.txt").exists()
        await run_command(app, pilot, "/new")
        await wait_for(lambda: bool(app.query("#welcome")), pilot)
        await pilot.press(*"hello", "enter")
        await wait_for(lambda: "In the new one." in transcript_text(app), pilot)
        await run_command(app, pilot, f"/resume {conv_id}")
        await wait_for(lambda: app.conversation_id == conv_id, pilot)
        await wait_for(lambda: "Wrote it." in transcript_text(app), pilot)
        await run_command(app, pilot, "/resume 0192f7a4-6c1e-7d2a-9b3e-000000000000")
        await wait_for(lambda: "no conversation" in said(app), pilot)  # typed, with hint
