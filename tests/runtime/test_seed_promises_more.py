"""Issue 37, "Done when" 1: a test per item the seeds promise, for the items not in
test_seed_promises.py (6, 9, 10 and the spend of attempts: there, and in
test_seed_promises_inbox.py) nor item 3's (hooks rewriting: its own file). Each goes
through the real Harness, names the seed line it checks, and is the compact end-to-end
check of that line (each feature's own tests are named in its docstring).

1. subagent spend in the session's totals, and `--max-cost` across children;
2. a crashing PreToolUse hook blocks its call;
4. a large tool catalog advertises only its search tool;
5. the conversation keeps working while the summary is made;
7. `search_output`, with read_output's locator authorization;
8. writes without the model, and `whenBusy: "reject"`'s typed busy error;
11. a storage error ends the harness with `SessionFailed`, and `closed` settles;
12. the README's crash sentence says what the checkpoint window is, exactly.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from runtime import Busy, Harness
from runtime.model.errors import SessionFailedError
from runtime.model.events import SessionFailed
from runtime.model.llm import ToolCall
from runtime.model.records import EntryKind, RunState
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.budget import Budget
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from runtime.store import failpoints
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import open_harness, streaming_text, until_stored

pytestmark = pytest.mark.usefixtures("store_kind")

ROOT = Path(__file__).resolve().parents[2]


def tool_call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall("c1", name, json.dumps(arguments))


# --- 1. subagent spend ------------------------------------------------------------------


async def test_seed_subagent_spend_counts_in_the_session_and_under_the_parents_max_cost(
    tmp_path: Path,
) -> None:
    """Seed 004: "Each conversation keeps token and cost totals… For the whole Session:
    `harness.usage()`" (issue 37 item 1: a child's spend was missing from the session's
    totals, and `--max-cost` held the parent's own spend only). The child's $0.60 counts
    in the parent's session total, and a $0.50 cap stops the parent before its next
    request. (The -p JSON and its exit: tests/e2e/test_session_spend.py.)"""
    task = {"description": "look around", "prompt": "CHILD: look"}
    turns = [
        {"match": "PARENT", "unless": ["REPORT"], "usage": {"prompt_tokens": 100,
         "completion_tokens": 10, "cost": 0.01},
         "tool_calls": [{"id": "t1", "name": "task", "arguments": task}]},
        {"match": "CHILD", "text": "REPORT: looked.",
         "usage": {"prompt_tokens": 5000, "completion_tokens": 50, "cost": 0.60}},
        {"match": "PARENT", "repeat": True, "text": "never sent"},
    ]  # fmt: skip
    with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        harness = await Harness.open(
            tmp_path / "home" / "bastion.sqlite",
            resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
            toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, tmp_path / "artifacts"),
            loop_settings=LoopSettings(checkpoint_interval=0.02, budget=Budget(max_cost=0.5)),
        )
        try:
            conv = await harness.create_conversation(str(tmp_path), settings={"model": "o/m"})
            await harness.drive(conv.id, approval_mode="full-auto")
            item = await harness.submit(conv.id, "PARENT: go")
            run = await asyncio.wait_for(harness.wait(item.id, conv.id), 60)
            usage = await harness.usage(conv.id)
        finally:
            await harness.close()
        asked = [r.body["messages"][-1]["content"] for r in server.requests]
    assert run.state == RunState.INTERRUPTED and run.error["code"] == "max_cost", run.error
    assert "never sent" not in json.dumps(asked)  # stopped before its next request
    assert usage.total.cost == pytest.approx(0.61)  # the child's spend is the session's
    assert usage.total.input_tokens == 5100 and len(usage.children) == 1


# --- 2. a crashing PreToolUse hook blocks -----------------------------------------------


@pytest.mark.parametrize("crash", ["exit 1", "python3 -c 'raise ValueError(\"the guard broke\")'"])
async def test_seed_a_throwing_pre_tool_hook_blocks_the_call(tmp_path: Path, crash: str) -> None:
    """Seed 004: "a throwing hook is reported and skipped (`beforeTool` blocks the
    call)" (issue 37 item 2: a guard that crashed let the write through). The hook's
    crash is one note, and the command it guarded never runs. (Every way a hook fails,
    each event: tests/hooks/test_failures.py; the front ends: test_guard_fronts.py.)"""
    from tests.hooks.helpers import command, open_session

    turns = [{"tool_calls": [command("echo ran > out.txt")]}, {"text": "done"}]
    with LoopbackServer(turns) as server:
        s = await open_session(tmp_path, server, {"PreToolUse": [{"command": crash}]})
        try:
            run = await s.prompt("go")
            notes = await s.notes()
        finally:
            await s.harness.close()
    assert run.state == "completed"
    assert not (s.workspace / "out.txt").exists()  # blocked: it never ran
    assert len(notes) == 1 and "the call is blocked" in notes[0], notes


# --- 4. the deferred tool catalog -------------------------------------------------------


async def test_seed_a_large_catalog_first_advertises_only_its_search_tool(tmp_path: Path) -> None:
    """Seed 000: a large catalog "initially advertises only its search tool" (issue 37
    item 4: every MCP schema went in every request). With 40 MCP tools the first request
    carries the search tool and no MCP schema; the tool a search finds is offered from
    the next request and runs. (Resume, fork, limits: tests/mcp/test_mcp_catalog.py.)"""
    from runtime.mcp.catalog import SEARCH_TOOL
    from tests.mcp.test_mcp_catalog import names, run_to_end, start, told, turn

    turns = [turn(SEARCH_TOOL, query="say text back"), turn("t__echo", text="hi"),
             ScriptedTurn(text="done")]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns)
    try:
        assert await run_to_end(harness, conv) == "completed"
    finally:
        await harness.close()
    first, second, _ = provider.requests
    assert SEARCH_TOOL in names(first) and not [n for n in names(first) if "__" in n]
    assert "t__echo" in names(second)
    assert told(provider) == "echo: hi"


# --- 5. compaction in the background ----------------------------------------------------


async def test_seed_the_conversation_keeps_working_while_the_summary_is_made(
    tmp_path: Path,
) -> None:
    """Seed 004: "The conversation keeps working while the summary is made. The summary
    is placed … at the next turn boundary" (issue 37 item 5: the turn stopped for it).
    The summary is written slowly; the run's next request goes out before it lands,
    and the request after it lands is built with it. (Its failures and its stop at a
    run's end: tests/runtime/test_background_compaction.py.)"""
    from tests.runtime.test_background_compaction import (
        SUMMARY,
        Held,
        ask,
        calls,
        near_the_window,
        open_tiny,
    )

    main, toolbox = ScriptedProvider(), Held()
    summariser = ScriptedProvider([ScriptedTurn(text=SUMMARY, chunk_size=20, delay=0.05)])
    harness = await open_tiny(tmp_path, main, summariser, toolbox)
    try:
        conv = await harness.create_conversation(
            str(tmp_path), settings={"model": "s/tiny", "approval_mode": "full-auto"}
        )
        await harness.drive(conv.id)
        await near_the_window(harness, conv.id, main)
        before = len(main.requests)
        main.add(
            ScriptedTurn(text="Reading.", tool_calls=calls("a")),
            ScriptedTurn(text="And the other.", tool_calls=calls("wait")),
            ScriptedTurn(text="Done."),
        )
        sent: list[int] = []

        async def land() -> None:
            await until_stored(
                harness.store, conv.id,
                lambda s: any(e.kind == EntryKind.SUMMARY for e in s.entries), "the summary",
            )  # fmt: skip
            sent.append(len(main.requests) - before)
            toolbox.landed.set()  # the run's last tool call returns only now

        lander = asyncio.create_task(land())
        run = await ask(harness, conv.id, "go")
        await lander
    finally:
        await harness.close()
    assert run.state == "completed"
    assert sent and sent[0] >= 2  # two requests went out while the summary was written
    texts = [json.dumps([str(m.content) for m in r.messages]) for r in main.requests[before:]]
    assert SUMMARY not in texts[1] and SUMMARY in texts[2]


# --- 7. search_output -------------------------------------------------------------------


async def test_seed_search_output_finds_lines_and_takes_only_this_sessions_ids(
    tmp_path: Path,
) -> None:
    """Seed 000: `search_output` searches spilled output "with the same locator
    authorization as `read_output`" (issue 37 item 7: output could only be paged).
    Through the harness: a command's long output is searched by `read_output`'s
    `pattern` (bastion's search_output), and an id no command of this session returned
    (another session's, or forged) is refused SPILL_REFERENCE_UNKNOWN. (Paging, bad
    patterns: tests/tools/test_search_output.py.)"""
    script = "for i in $(seq 1 20000); do echo line $i; done; echo 'ERROR: disk full'"
    artifacts = tmp_path / "artifacts"
    provider = ScriptedProvider([ScriptedTurn(tool_calls=(tool_call("run_command", command=script),)),
                                 ScriptedTurn(text="ran")])  # fmt: skip
    harness = await Harness.open(
        tmp_path / "bastion.sqlite",
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, artifacts / conv.id),
        loop_settings=LoopSettings(checkpoint_interval=0.02),
    )
    try:
        first = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(first.id, approval_mode="full-auto")
        await harness.wait((await harness.submit(first.id, "run it")).id, first.id)
        (ran,) = (await harness.snapshot(first.id)).tool_calls
        output_id = ran.result["data"]["output_id"]  # (its output spilled)
        provider.add(
            ScriptedTurn(tool_calls=(tool_call("read_output", id=output_id, pattern="ERROR"),)),
            ScriptedTurn(text="found"),
        )
        await harness.wait((await harness.submit(first.id, "find the error")).id, first.id)
        found = str(provider.requests[-1].messages[-1].content)
        # another session asks for the first one's output by its id: not its own
        other = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(other.id, approval_mode="full-auto")
        provider.add(
            ScriptedTurn(tool_calls=(tool_call("read_output", id=output_id, pattern="ERROR"),)),
            ScriptedTurn(text="refused"),
        )
        await harness.wait((await harness.submit(other.id, "peek")).id, other.id)
        refused = str(provider.requests[-1].messages[-1].content)
    finally:
        await harness.close()
    assert "20001: ERROR: disk full" in found and "1 matching line(s)" in found
    assert "SPILL_REFERENCE_UNKNOWN" in refused and "disk full" not in refused


# --- 8. writes and reject-when-busy -----------------------------------------------------


async def test_seed_a_write_asks_no_model_and_reject_when_busy_is_typed(tmp_path: Path) -> None:
    """Seed 004: "Writes append an entry without asking the model anything" and
    `whenBusy: "reject"` "throws ConversationBusy" (bastion's typed `Busy`; issue 37
    item 8). (Over the protocol, request keys: tests/runtime/test_writes_busy.py.)"""
    from tests.tui.conftest import HangingProvider

    provider = HangingProvider("working on it")
    harness = await open_harness(tmp_path, provider)
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(conv.id)
        written = await harness.write(conv.id, "FYI: the tests live in spec/.")
        assert written.kind == "user" and provider.requests == []  # no model asked
        await harness.submit(conv.id, "start")
        await asyncio.wait_for(provider.streamed.wait(), 30)
        before = await harness.snapshot(conv.id)
        with pytest.raises(Busy):
            await harness.submit(conv.id, "only if idle", when_busy="reject")
        after = await harness.snapshot(conv.id)
        assert after.version == before.version  # nothing admitted
        await harness.interrupt(conv.id)
    finally:
        await harness.close()
    assert "FYI: the tests live in spec/." in json.dumps([str(m.content) for m in
                                                          provider.requests[0].messages])  # fmt: skip


# --- 11. a storage error ends the harness -----------------------------------------------


@pytest.mark.sqlite_only
async def test_seed_a_storage_error_ends_the_harness_and_closed_settles(tmp_path: Path) -> None:
    """Seed 004: "A storage error ends the Harness … every pending wait rejects with
    `SessionFailed` … watches and event streams end with `session_failed` … `closed`
    settles" (issue 37 item 11). (Each kind of fault, the protocol, resuming after:
    tests/runtime/test_storage_failure.py; the front ends: tests/e2e/test_storage_failure.py,
    tests/tui/test_session_failed_tmux.py; a real full disk: tests/e2e/test_disk_full.py.)"""
    provider = ScriptedProvider([ScriptedTurn(text="word " * 400, chunk_size=5, delay=0.005)])
    harness = await open_harness(tmp_path, provider)
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
        await harness.drive(conv.id)
        item = await harness.submit(conv.id, "go")
        await until_stored(harness.store, conv.id, streaming_text, "text checkpointed")
        events = harness.subscribe(conv.id)
        waiting = asyncio.ensure_future(harness.wait(item.id, conv.id))
        failpoints.arm("store.full:1")
        ended = [e async for e in events if isinstance(e, SessionFailed)]  # the stream ends
        with pytest.raises(SessionFailedError):
            await asyncio.wait_for(waiting, 10)
        await asyncio.wait_for(harness.wait_closed(), 10)  # closed settles
        with pytest.raises(SessionFailedError):
            await harness.submit(conv.id, "after")
    finally:
        failpoints.arm(None)
        await harness.close()
    assert len(ended) == 1 and ended[0].reason == "store_full"


# --- 12. the README's crash sentence ----------------------------------------------------


def test_seed_the_readme_says_exactly_the_checkpoint_window() -> None:
    """Seed 004: "Partial answers and tool output are committed at most every 100 ms by
    default, so a crash loses at most that window" (issue 37 item 12: the README said
    no shown character was lost; a kill inside the window loses up to the window). The
    README's window is the harness's default checkpoint interval, and it promises no
    more than losing that window."""
    readme = (ROOT / "README.md").read_text()
    window = LoopSettings().checkpoint_interval * 1000
    said = re.search(r"committed at most one\s+checkpoint\s+interval \((\d+) ms\) later", readme)
    assert said is not None, "the README no longer says the checkpoint window"
    assert int(said.group(1)) == window
    assert re.search(r"lose at most\s+that last moment of text", readme)
    feature = re.search(r"everything shown is committed within (\d+) ms", readme)
    assert feature is not None and int(feature.group(1)) == window
    assert not re.search(r"no\b[^.]{0,40}\bcharacter\b[^.]{0,20}\blost", readme)  # (overstated)
