"""PreCompact (Claude Code's name and shape): runs before an automatic compaction
with `trigger = "auto"`; `hookSpecificOutput.customInstructions` is added to what the
summary is asked to keep; "block" (or exit 2) stops automatic compaction for the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runtime.hooks import parse_hooks
from runtime.model.records import EntryKind
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.hooks.helpers import script
from tests.runtime.test_compaction import ask, open_with

RUNS = 8


async def talk(tmp_path: Path, hook: Path, **spec: Any) -> tuple[Any, Any, Any]:
    """RUNS long prompts to a model with a 4000-token window (compaction is due)."""
    config = Config(
        compact_model="sum/small",
        models={"s/tiny": {"context_window": 4000, "max_output_tokens": 500}},
        hooks=parse_hooks({"PreCompact": [{"command": str(hook), **spec}]}, "config.toml"),
    )
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(RUNS)])
    summariser = ScriptedProvider([ScriptedTurn(text=f"summary {i}") for i in range(RUNS)])
    harness = await open_with(tmp_path, main, config, summariser)
    workspace = tmp_path / "ws"  # not the store's folder: commands never write that one
    workspace.mkdir()
    conv = await harness.create_conversation(str(workspace), settings={"model": "s/tiny"})
    await harness.drive(conv.id)
    try:
        for i in range(RUNS):
            run = await ask(harness, conv.id, f"prompt {i} " + "word " * 400)
            assert run.state == "completed", run.error
        snap = await harness.snapshot(conv.id)
    finally:
        await harness.close()
    return snap, main, summariser


async def test_pre_compact_adds_instructions_to_the_summary(tmp_path):
    answer = {"hookSpecificOutput": {"hookEventName": "PreCompact",
                                     "customInstructions": "keep every file name"}}  # fmt: skip
    hook = script(
        tmp_path / "hooks", "pc.sh", f"cat >> pc.log; echo >> pc.log\necho '{json.dumps(answer)}'\n"
    )
    snap, _, summariser = await talk(tmp_path, hook)
    summaries = [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert summaries and len(summariser.requests) == len(summaries)
    assert all("keep every file name" in str(r.messages[-1].content) for r in summariser.requests)
    events = [
        json.loads(line) for line in (tmp_path / "ws" / "pc.log").read_text().splitlines() if line
    ]
    assert events[0]["hook_event_name"] == "PreCompact" and events[0]["trigger"] == "auto"
    notes = [e.text for e in snap.entries if e.kind == EntryKind.NOTE]
    assert notes and all("added instructions to the summary: keep every file name" in n
                         for n in notes)  # fmt: skip


async def test_pre_compact_blocks_automatic_compaction(tmp_path):
    hook = script(tmp_path / "hooks", "no.sh", "echo run >> pc.log\necho 'not now' >&2\nexit 2\n")
    snap, _, summariser = await talk(tmp_path, hook)
    assert not [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert summariser.requests == []
    notes = [e.text for e in snap.entries if e.kind == EntryKind.NOTE]
    assert notes and all(n.endswith("blocked: not now") for n in notes)
    assert len((tmp_path / "ws" / "pc.log").read_text().splitlines()) == len(notes)  # once per run


async def test_a_failing_pre_compact_hook_decides_nothing(tmp_path):
    hook = script(tmp_path / "hooks", "bad.sh", "echo 'this is not JSON {'\n")
    snap, _, summariser = await talk(tmp_path, hook)
    assert [e for e in snap.entries if e.kind == EntryKind.SUMMARY]  # compaction went on
    assert "this is not JSON" not in json.dumps([str(r.messages) for r in summariser.requests])


async def test_a_pre_compact_hook_that_hangs_is_killed_and_compaction_goes_on(tmp_path):
    hook = script(tmp_path / "hooks", "hang.sh", "sleep 300\n")
    snap, _, _ = await talk(tmp_path, hook, timeout=0.5)
    assert [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    notes = [e.text for e in snap.entries if e.kind == EntryKind.NOTE]
    assert notes and all("ran past its 0.5 s limit and was killed" in n for n in notes)


async def compact_by_hand(tmp_path: Path, body: str) -> tuple[Any, Any, Any]:
    """Two answered runs, then /compact with the user's own instructions."""
    hook = script(tmp_path / "hooks", "pc.sh", body)
    config = Config(
        compact_model="sum/small",
        hooks=parse_hooks({"PreCompact": [{"command": str(hook)}]}, "config.toml"),
    )
    main = ScriptedProvider([ScriptedTurn(text="first"), ScriptedTurn(text="second")])
    summariser = ScriptedProvider([ScriptedTurn(text="SUMMARY")])
    harness = await open_with(tmp_path, main, config, summariser)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    conv = await harness.create_conversation(str(workspace), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id)
    try:
        await ask(harness, conv.id, "one")
        await ask(harness, conv.id, "two")
        summary = await harness.compact(conv.id, "focus on file a")
        snap = await harness.snapshot(conv.id)
    finally:
        await harness.close()
    return summary, snap, summariser


async def test_compact_by_hand_runs_pre_compact_with_the_users_instructions(tmp_path):
    answer = {"hookSpecificOutput": {"customInstructions": "and keep the todo list"}}
    body = f"cat > pc.log\necho '{json.dumps(answer)}'\n"
    summary, snap, summariser = await compact_by_hand(tmp_path, body)
    assert summary is not None
    asked = str(summariser.requests[0].messages[-1].content)
    assert "focus on file a" in asked and "and keep the todo list" in asked
    event = json.loads((tmp_path / "ws" / "pc.log").read_text())
    assert event["trigger"] == "manual" and event["custom_instructions"] == "focus on file a"
    notes = [e.text for e in snap.entries if e.kind == EntryKind.NOTE]
    assert notes == []  # instructions for a summary the user asked for: no line needed


async def test_a_block_does_not_stop_a_compaction_the_user_asked_for(tmp_path):
    summary, snap, _ = await compact_by_hand(tmp_path, "echo 'not now' >&2\nexit 2\n")
    assert summary is not None
    notes = [e.text for e in snap.entries if e.kind == EntryKind.NOTE]
    assert len(notes) == 1 and notes[0].endswith(
        "blocked: not now (a /compact you asked for goes on)"
    )


async def test_a_decided_pre_compact_is_read_back_after_a_stop_mid_summary(tmp_path):
    """Bastion stops while the summary the hook guided is written: the resumed run
    compacts at the same point with the same instructions, without asking the hook."""
    from tests.runtime.test_urgent import FirstHangs

    answer = {"hookSpecificOutput": {"customInstructions": "keep every file name"}}
    hook = script(tmp_path / "hooks", "pc.sh", f"echo run >> pc.log\necho '{json.dumps(answer)}'\n")
    config = Config(
        compact_model="sum/small",
        models={"s/tiny": {"context_window": 4000, "max_output_tokens": 500}},
        hooks=parse_hooks({"PreCompact": [{"command": str(hook)}]}, "config.toml"),
    )
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(RUNS)])
    hangs = FirstHangs([])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    a = await open_with(tmp_path, main, config, hangs)
    conv = await a.create_conversation(str(workspace), settings={"model": "s/tiny"})
    await a.drive(conv.id)
    item = None
    for i in range(RUNS):
        item = await a.submit(conv.id, f"prompt {i} " + "word " * 400)
        done = asyncio.ensure_future(a.wait(item.id, conv.id))
        stopped = asyncio.ensure_future(hangs.streamed.wait())
        await asyncio.wait([done, stopped], return_when=asyncio.FIRST_COMPLETED)
        if hangs.streamed.is_set():
            done.cancel()
            break
        stopped.cancel()
    assert hangs.streamed.is_set() and item is not None
    await a.close()  # as a crash would leave it: the summary half written
    summariser = ScriptedProvider([ScriptedTurn(text="SUMMARY")])
    after = ScriptedProvider([ScriptedTurn(text="after") for _ in range(RUNS)])
    b = await open_with(tmp_path, after, config, summariser)
    await b.drive(conv.id)
    try:
        run = await b.wait(item.id, conv.id)
    finally:
        await b.close()
    assert run.state == "completed", run.error
    assert (workspace / "pc.log").read_text() == "run\n"  # decided once
    assert "keep every file name" in str(summariser.requests[0].messages[-1].content)
