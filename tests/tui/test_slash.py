"""Slash commands, their completion and the command palette, against a real harness."""

from __future__ import annotations

import json

from textual.command import CommandPalette

from runtime import ConfigError, Harness
from runtime.model.llm import Usage
from runtime.model.records import EntryKind
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.tui.conftest import MODEL, SIZE, run_settled, wait_for
from tui.app import BastionApp
from tui.slash import COMMANDS
from tui.widgets import CommandHints, CommandOutput, PromptInput, StatusBar


def said(app: BastionApp) -> str:
    out = app.query_one(CommandOutput)
    return str(out.query_one("#command-text").render()) if out.shown else ""


def status(app: BastionApp) -> str:
    return str(app.query_one("#status-left").render())


async def open_validating(tmp_path, provider) -> tuple[Harness, str]:
    """Like open_driven, with a resolver that refuses unknown providers (as the real one)."""

    def resolve(spec: str):
        provider_name, _, name = spec.partition("/")
        if provider_name != "scripted" or not name:
            raise ConfigError(f"unknown provider in {spec!r}", hint="use scripted/NAME")
        return provider, name

    harness = await Harness.open(tmp_path / "bastion.sqlite", resolve_model=resolve)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": MODEL})
    await harness.drive(conv.id, interactive=True)
    return harness, conv.id


async def run_command(app, pilot, line: str) -> None:
    app.query_one(PromptInput).set_value(line)
    await pilot.press("enter")
    await pilot.pause(0.05)


async def test_help_lists_every_command_and_nothing_reaches_the_model(harness_process):
    proc = harness_process([])
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/help")
        await wait_for(lambda: "/model [NAME]" in said(app), pilot)
        text = said(app)
        for name in ("help", "model", "mode", "new", "resume", "compact", "export"):
            assert f"/{name}" in text
        assert "/theme" in text and "/cost" in text and "/quit" in text and "/clear" in text
        assert app.query_one(PromptInput).text == ""
        await pilot.press("escape")  # no run going: Esc closes the output
        assert not app.query_one(CommandOutput).shown
    assert proc.requests == []
    # nothing was sent: the new conversation was never even stored (no entry, no run)
    assert not await proc.stored()


async def test_an_unknown_command_says_so_keeps_the_draft_and_sends_nothing(
    harness_process, tmp_path
):
    provider = ScriptedProvider([ScriptedTurn(text="ok")])
    proc = harness_process(provider)
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/sessions")
        assert "unknown command /sessions" in said(app) and "/help" in said(app)
        assert app.query_one(CommandOutput).has_class("-error")
        assert app.query_one(PromptInput).text == "/sessions"
        # A path is not a command, and // sends a leading slash.
        await run_command(app, pilot, "//sessions please")
        await wait_for(lambda: run_settled(app), pilot)
    snap = await proc.snapshot()
    assert [e.text for e in snap.entries if e.kind == EntryKind.USER] == ["/sessions please"]


async def test_typing_a_slash_offers_completions_and_tab_completes(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press("/")
        hints = app.query_one(CommandHints)
        assert hints.shown and len(hints.matches) == len(COMMANDS)
        await pilot.press("m", "o")
        assert [c.name for c in hints.matches] == ["model", "mode"]
        await pilot.press("down", "tab")
        assert app.query_one(PromptInput).text == "/mode "
        assert not hints.shown  # a space ends the command word
        await pilot.press(*"full-auto", "enter")
        await wait_for(lambda: "full-auto" in status(app), pilot)
        await pilot.press("/", "h", "enter")  # Enter completes and runs an argless one
        await wait_for(lambda: "/compact" in said(app), pilot)


async def test_model_lists_switches_and_refuses_an_unknown_name(harness_process, trusted):
    proc = harness_process([{"text": "one"}])
    trusted(proc.work)
    (proc.work / ".bastion").mkdir()
    (proc.work / ".bastion" / "config.toml").write_text(
        '[providers.localproxy]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    app = proc.app()
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/model")
        await wait_for(lambda: "model: openai/test" in said(app), pilot)
        assert "providers: openai, anthropic, ollama, localproxy" in said(app)
        await run_command(app, pilot, "/model nope/x")
        await wait_for(lambda: "unknown provider 'nope' in model 'nope/x'" in said(app), pilot)
        assert "openai/test" in status(app)
        await run_command(app, pilot, "/model openai/other")
        await wait_for(lambda: "openai/other" in status(app), pilot)
        await pilot.press(*"hi", "enter")
        await wait_for(lambda: run_settled(app), pilot)
    assert [r.body["model"] for r in proc.requests] == ["other"]
    assert (await proc.snapshot()).conversation.agent.model == "openai/other"


async def test_mode_lists_switches_and_refuses_an_unknown_mode(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/mode")
        await wait_for(lambda: "auto-edit" in said(app), pilot)
        await run_command(app, pilot, "/mode yolo")
        await wait_for(lambda: "unknown approval mode 'yolo'" in said(app), pilot)
        await run_command(app, pilot, "/mode read-only")
        await wait_for(lambda: "read-only" in status(app), pilot)
        assert (
            await app.harness.session_settings(app.conversation_id)
        ).approval_mode == "read-only"


async def test_new_and_clear_start_a_fresh_conversation_and_keep_the_old_one(harness_process):
    proc = harness_process([ScriptedTurn(text="A."), ScriptedTurn(text="B.")])
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        conv_id = app.conversation_id
        await pilot.press(*"first", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await run_command(app, pilot, "/clear")
        await wait_for(lambda: app.conversation_id != conv_id and app.view is not None, pilot)
        await wait_for(lambda: bool(app.query("#welcome")), pilot)
        assert app.view.conversation.id == app.conversation_id and not app.view.settled
        assert app.resumable == conv_id  # nothing sent here yet: leaving names the old one
        await pilot.press(*"second", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        fresh = app.conversation_id
        assert app.resumable == fresh
    old = await proc.snapshot(conv_id)
    new = await proc.snapshot(fresh)
    assert [e.text for e in old.entries] == ["first", "A."]
    assert [e.text for e in new.entries] == ["second", "B."]
    sent = proc.requests[1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["second"]


async def test_resume_compact_cost_and_quit(harness_process, tmp_path):
    turn = ScriptedTurn(text="A.", usage=Usage(1200, 30, cost=0.0012))
    proc = harness_process(ScriptedProvider([turn]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/cost")
        await wait_for(lambda: "no usage yet" in said(app), pilot)
        await run_command(app, pilot, "/resume 0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e")
        await wait_for(lambda: "no conversation" in said(app), pilot)
        await run_command(app, pilot, "/compact keep the API notes")
        await wait_for(lambda: "nothing to compact yet" in said(app), pilot)
        await pilot.press(*"go", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await run_command(app, pilot, "/cost")
        await wait_for(lambda: "1.2k in, 30 out $0.0012 over 1 run" in said(app), pilot)
        await run_command(app, pilot, "/quit")
        await wait_for(lambda: app.return_code == 0, pilot)


async def test_export_writes_markdown_or_json_and_says_where(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([ScriptedTurn(text="A.")]))
    app = proc.app()
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/export")
        await wait_for(lambda: "nothing to export yet" in said(app), pilot)
        await pilot.press(*"hello", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        await run_command(app, pilot, "/export")
        md = proc.work / f"bastion-{app.conversation_id[:8]}.md"
        await wait_for(lambda: "exported to" in said(app), pilot)
        assert str(md) in said(app).replace("\n", "")
        assert "## User\n\nhello" in md.read_text() and "A." in md.read_text()
        await run_command(app, pilot, "/export json")
        path = proc.work / f"bastion-{app.conversation_id[:8]}.json"
        await wait_for(path.exists, pilot)
        data = json.loads(path.read_text())
        assert [e["text"] for e in data["entries"]] == ["hello", "A."]
        await run_command(app, pilot, "/export pdf")
        await wait_for(lambda: "markdown or json" in said(app), pilot)


async def test_theme_lists_switches_live_and_refuses_an_unknown_name(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/theme")
        await wait_for(lambda: "bastion-light" in said(app), pilot)
        before = app.query_one(StatusBar).styles.background
        await run_command(app, pilot, "/theme bastion-light")
        await wait_for(lambda: app.theme == "bastion-light", pilot)
        await pilot.pause(0.05)
        assert app.query_one(StatusBar).styles.background != before
        await run_command(app, pilot, "/theme nope")
        await wait_for(lambda: "unknown theme 'nope'" in said(app), pilot)
        assert "bastion-dark" in said(app) and app.theme == "bastion-light"


async def test_the_command_palette_runs_the_same_commands(harness_process, tmp_path):
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press("ctrl+p")
        await wait_for(lambda: isinstance(app.screen, CommandPalette), pilot)
        await pilot.press(*"help")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(lambda: "/model [NAME]" in said(app), pilot)
        assert not isinstance(app.screen, CommandPalette)


def transcript_text(app: BastionApp) -> str:
    from tui.widgets import AssistantEntry

    return "\n".join(w.text_shown for w in app.query(AssistantEntry))


async def test_resume_switches_to_a_stored_conversation_here(harness_process):
    """`/resume ID` (what the picker returns) releases this conversation and goes on
    with that one: its transcript shows, and the next prompt goes to it."""
    proc = harness_process(
        [{"text": "first answer"}, {"text": "second answer"}, {"text": "back in the first"}]
    )
    first = await proc.session(["in the first"])  # stored by a harness process, closed
    app = proc.app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        other = app.conversation_id
        await pilot.press(*"in the second", "enter")
        await wait_for(lambda: run_settled(app), pilot)
        short = (await app.harness.short_ids([first]))[first]  # as the picker shows it
        assert len(short) < len(first)
        await run_command(app, pilot, f"/resume {short}")
        await wait_for(lambda: app.conversation_id == first, pilot)
        await wait_for(lambda: "first answer" in transcript_text(app), pilot)
        await pilot.press(*"again", "enter")
        await wait_for(lambda: "back in the first" in transcript_text(app), pilot)
        pid = proc.children[-1].process.pid  # the harness process drives the first now
        assert (await proc.lease(first)).pid == pid
        assert (await proc.lease(other)).owner is None  # and let the other go
    snap = await proc.snapshot(first)
    assert [e.text for e in snap.entries][-2:] == ["again", "back in the first"]


async def test_fork_rewind_and_restore_from_the_prompt(harness_process):
    """/fork goes on in a copy; /rewind N goes back to before message N (its text back in
    the prompt, the plan said), and /restore removes the file the model wrote since."""
    import json as _json

    from runtime.model.llm import ToolCall

    write = ToolCall("w1", "write_file", _json.dumps({"path": "notes.txt", "content": "hi\n"}))
    proc = harness_process(
        [ScriptedTurn(text="Writing.", tool_calls=(write,)), ScriptedTurn(text="Wrote it.")]
    )
    work = proc.work
    app = proc.app(approval_mode="full-auto")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        conv_id = app.conversation_id
        await pilot.press(*"write the notes", "enter")
        await wait_for(lambda: run_settled(app) and (work / "notes.txt").exists(), pilot)
        await run_command(app, pilot, "/fork")
        await wait_for(lambda: "forked" in said(app), pilot)
        forked = app.conversation_id
        assert forked != conv_id
        await wait_for(lambda: "Wrote it." in transcript_text(app), pilot)
        await run_command(app, pilot, "/rewind")
        await wait_for(lambda: "1 write the notes" in said(app), pilot)
        await run_command(app, pilot, "/rewind 1")
        await wait_for(lambda: "rewound" in said(app), pilot)
        assert app.conversation_id not in (conv_id, forked)
        assert app.query_one(PromptInput).text == "write the notes"
        assert "notes.txt" in said(app) and (work / "notes.txt").exists()
        await run_command(app, pilot, "/restore")
        await wait_for(lambda: "removed notes.txt" in said(app), pilot)
        assert not (work / "notes.txt").exists()


async def test_a_command_typed_after_a_kept_draft_runs_and_is_never_sent(harness_process):
    """/rewind puts the message back in the prompt; typing /restore after it (keys, as a
    user does) runs /restore and leaves the message to edit, instead of sending
    `write the notes/restore`. An unknown command stays to fix; /theme typed after it
    runs, instead of sending `/frobnicate/theme`."""
    import json as _json

    from runtime.model.llm import ToolCall

    write = ToolCall("w1", "write_file", _json.dumps({"path": "notes.txt", "content": "hi\n"}))
    proc = harness_process(
        [ScriptedTurn(text="Writing.", tool_calls=(write,)), ScriptedTurn(text="Wrote it.")]
    )
    work = proc.work
    app = proc.app(approval_mode="full-auto")
    prompt_text = lambda: app.query_one(PromptInput).text  # noqa: E731
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await pilot.press(*"write the notes", "enter")
        await wait_for(lambda: run_settled(app) and (work / "notes.txt").exists(), pilot)
        await run_command(app, pilot, "/rewind 1")
        await wait_for(lambda: "rewound" in said(app), pilot)
        assert prompt_text() == "write the notes"
        await pilot.press(*"/restore", "enter")
        await wait_for(lambda: "removed notes.txt" in said(app), pilot)
        assert prompt_text() == "write the notes"
        await run_command(app, pilot, "/frobnicate")
        await wait_for(lambda: "unknown command /frobnicate" in said(app), pilot)
        assert prompt_text() == "/frobnicate"  # kept, to fix
        assert said(app).count("/help lists the commands") == 1  # its hint said once
        await pilot.press("end", *"/theme", "enter")
        await wait_for(lambda: "themes:" in said(app), pilot)
        assert prompt_text() == ""
        await pilot.pause(0.2)
        rewound = app.conversation_id
        view = await app.harness.snapshot(rewound)  # (through the protocol)
        assert [e.text for e in view.entries] == []  # nothing was sent to the model
    assert len(proc.requests) == 2


async def test_export_never_replaces_a_file_and_names_never_collide(harness_process):
    """Two sessions made in the same minute share their first 8 hex digits: their
    exports get names as long as makes them unique. Exporting again writes a new
    file (`-2`), never over the first."""
    proc = harness_process([ScriptedTurn(text="A."), ScriptedTurn(text="B.")])
    work = proc.work
    made = await proc.session(["hello"])
    app = proc.app(resume=made)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        # Two forks made one after the other share their first 8 hex digits (a uuid7's
        # time, which turns over every 65.5 s: a third is made if one fell between).
        forks = [await app.harness.fork(made) for _ in range(2)]  # (through the protocol)
        if forks[0].id[:8] != forks[1].id[:8]:
            forks[0] = await app.harness.fork(made)
        conv_id, copy = forks[0].id, forks[1]
        assert copy.id[:8] == conv_id[:8]
        await run_command(app, pilot, "/resume " + conv_id)
        await wait_for(lambda: app.conversation_id == conv_id, pilot)
        await run_command(app, pilot, "/export")
        await wait_for(lambda: "exported to" in said(app), pilot)
        first = sorted(work.glob("bastion-*.md"))
        assert len(first) == 1
        original = first[0].read_text()
        await run_command(app, pilot, "/resume " + copy.id)
        await wait_for(lambda: app.conversation_id == copy.id, pilot)
        await run_command(app, pilot, "/export")
        await wait_for(lambda: len(list(work.glob("bastion-*.md"))) == 2, pilot)
        await run_command(app, pilot, "/export")
        await wait_for(lambda: len(list(work.glob("bastion-*.md"))) == 3, pilot)
        await wait_for(lambda: "-2.md" in said(app).replace("\n", ""), pilot)
        short = await app.harness.short_ids([conv_id, copy.id])
    names = sorted(p.name for p in work.glob("bastion-*.md"))
    assert names == sorted(
        [f"bastion-{short[conv_id]}.md", f"bastion-{short[copy.id]}.md",
         f"bastion-{short[copy.id]}-2.md"]
    )  # fmt: skip
    assert first[0].read_text() == original


async def test_help_key_lines_fit_at_80_columns(harness_process, tmp_path):
    """/help's key lines (five) are each whole at 80x24: no phrase is cut by wrapping."""
    proc = harness_process(ScriptedProvider([]))
    app = proc.app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(app.ready.is_set, pilot)
        await run_command(app, pilot, "/help")
        await wait_for(lambda: "/model [NAME]" in said(app), pilot)
        room = app.query_one(CommandOutput).query_one("#command-text").content_region.width
        lines = said(app).splitlines()
        keys = [line for line in lines if line.startswith(("keys", "\u00a0"))]
        assert len(keys) == 5 and all(len(line) <= room for line in keys), (room, keys)
