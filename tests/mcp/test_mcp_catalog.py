"""The deferred catalog in the harness (runtime.mcp.catalog), with real MCP servers over
stdio (tests/mcp/lean_server.py: 7 tools, catalog_server.py: 33) and a scripted model:
the first request offers the search tool instead of 40 schemas; a search loads a tool,
which is offered from the next request and runs; the loaded set comes back after a
restart mid-run and in a fork; a tool never loaded, or of a server that is down, is
refused in one line without asking anyone."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from runtime import Harness
from runtime.mcp.catalog import SEARCH_TOOL
from runtime.model.llm import ModelRequest, ToolCall
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.mcp.conftest import stdio_server
from tests.runtime.helpers import store_location

# The loaded set is stored with the session, so the test of its coming back after a
# restart and in a fork runs on both stores; the rest is the catalog's own logic over
# two MCP servers (the lean doubles: a few hundredths of a second of CPU each to start,
# where the SDK's cost ~0.7 s), the same on either store, so it runs on SQLite alone
# (issue 35: the suite's time).

CATALOG = {"command": sys.executable, "args": [str(Path(__file__).with_name("catalog_server.py"))]}
FORTY = {"t": stdio_server(), "gh": CATALOG}  # 7 + 33 tools
DOWN = {"command": "/nonexistent/mcp-server"}


def turn(tool: str, **arguments: object) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=(ToolCall("c1", tool, json.dumps(arguments)),))


def names(request: ModelRequest) -> set[str]:
    return {t.name for t in request.tools}


def told(provider: ScriptedProvider, request: int = -1) -> str:
    content = provider.requests[request].messages[-1].content
    return content if isinstance(content, str) else str(content)


async def open_harness(
    tmp_path: Path, provider: ScriptedProvider, servers: dict, **config: object
) -> Harness:
    (tmp_path / "work").mkdir(exist_ok=True)
    return await Harness.open(
        store_location(tmp_path, "home/bastion.sqlite"),
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, tmp_path / "artifacts"),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=Config(mcp_servers=servers, **config),  # type: ignore[arg-type]
    )


async def start(
    tmp_path: Path, turns: list[ScriptedTurn], servers: dict = FORTY, **config: object
) -> tuple[Harness, str, ScriptedProvider]:
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, servers, **config)
    conv = await harness.create_conversation(str(tmp_path / "work"), settings={"model": "s/m"})
    await harness.drive(conv.id, interactive=True, approval_mode="ask", allow=("t__echo",))
    return harness, conv.id, provider


async def run_to_end(harness: Harness, conv: str, prompt: str = "go") -> str:
    item = await harness.submit(conv, prompt)
    return (await asyncio.wait_for(harness.wait(item.id, conv, poll=0.05), 90)).state


async def test_forty_tools_the_first_request_offers_the_search_tool_not_their_schemas(tmp_path):
    turns = [turn(SEARCH_TOOL, query="say text back"), turn("t__echo", text="hi"),
             ScriptedTurn(text="done")]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns)
    try:
        assert await run_to_end(harness, conv) == "completed"
        first, second, third = provider.requests
        assert SEARCH_TOOL in names(first)
        assert not [n for n in names(first) if "__" in n]  # not one MCP schema
        search = next(t for t in first.tools if t.name == SEARCH_TOOL)
        assert "40 MCP tools" in search.description and "gh__create_issue" in search.description
        found = told(provider, 1)  # the search's answer: the match, with its schema
        assert found.startswith("1 MCP tool matching 'say text back', now loaded")
        assert "t__echo: Say `text` back." in found and '"required":["text"]' in found
        assert names(second) == names(first) | {"t__echo"}  # loaded from the next request on
        assert names(third) == names(second)
        assert told(provider) == "echo: hi"
        snap = await harness.store.snapshot(conv)
        assert [(c.name, c.approval) for c in snap.tool_calls] == [
            (SEARCH_TOOL, "not_required"),  # a search reads the servers' lists: never asks
            ("t__echo", "approved"),  # a loaded tool asks as any MCP tool (allowed here)
        ]
    finally:
        await harness.close()


async def test_under_the_threshold_nothing_changes(tmp_path):
    harness, conv, provider = await start(tmp_path, [turn("t__echo", text="hi"),
                                                     ScriptedTurn(text="ok")], {"t": stdio_server()})  # fmt: skip
    try:
        assert await run_to_end(harness, conv) == "completed"
        offered = names(provider.requests[0])
        assert SEARCH_TOOL not in offered and {"t__echo", "t__slow", "t__grow"} <= offered
        assert told(provider) == "echo: hi"
    finally:
        await harness.close()


async def test_false_offers_every_schema_however_many(tmp_path):
    harness, conv, provider = await start(tmp_path, [ScriptedTurn(text="ok")], mcp_tool_search=None)
    try:
        assert await run_to_end(harness, conv) == "completed"
        offered = names(provider.requests[0])
        assert SEARCH_TOOL not in offered and len([n for n in offered if "__" in n]) == 40
    finally:
        await harness.close()


async def test_a_tool_never_loaded_is_refused_without_asking(tmp_path):
    turns = [turn("gh__create_issue", owner="o", repo="r", title="t", body="b"),
             ScriptedTurn(text="ok")]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns)
    try:
        assert await run_to_end(harness, conv) == "completed"  # never awaited an approval
        assert told(provider) == (
            "REFUSED SEARCH_REQUIRED: gh__create_issue is not loaded; search for it first\n"
            'hint: mcp_search_tools {"query": "gh__create_issue"} loads it; call it after that'
        )
        (call,) = (await harness.store.snapshot(conv)).tool_calls
        assert call.approval == "not_required" and call.state == "done"
    finally:
        await harness.close()


async def until_search_committed(harness: Harness, conv: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        snap = await harness.store.snapshot(conv)
        if any(c.name == SEARCH_TOOL and c.state == "done" for c in snap.tool_calls):
            return
        await asyncio.sleep(0.02)  # (poll interval)
    raise AssertionError("the search was never committed")


@pytest.mark.usefixtures("store_kind")
async def test_the_loaded_tool_survives_a_restart_mid_run_and_a_fork(tmp_path):
    """Harness A searches, then stops while the model streams its next turn (as a crash
    would leave it); harness B resumes the run and offers the loaded tool at once."""
    slow = ScriptedTurn(text="thinking " * 200, chunk_size=4, delay=0.05)
    provider_a = ScriptedProvider([turn(SEARCH_TOOL, query="t__echo"), slow])
    a = await open_harness(tmp_path, provider_a, FORTY)
    conv = (await a.create_conversation(str(tmp_path / "work"), settings={"model": "s/m"})).id
    await a.drive(conv, approval_mode="ask", allow=("t__echo",))
    item = await a.submit(conv, "go")
    await until_search_committed(a, conv)
    await a.close()
    assert "t__echo" not in names(provider_a.requests[0])

    provider_b = ScriptedProvider([turn("t__echo", text="after the restart"),
                                   ScriptedTurn(text="done"), ScriptedTurn(text="forked")])  # fmt: skip
    b = await open_harness(tmp_path, provider_b, FORTY)
    try:
        await b.drive(conv, approval_mode="ask", allow=("t__echo",))
        run = await asyncio.wait_for(b.wait(item.id, conv, poll=0.05), 90)
        assert run.state == "completed"
        resumed = provider_b.requests[0]
        assert "t__echo" in names(resumed) and SEARCH_TOOL in names(resumed)
        assert told(provider_b) == "echo: after the restart"
        snap = await b.store.snapshot(conv)
        assert [c.name for c in snap.tool_calls] == [SEARCH_TOOL, "t__echo"]  # not searched again

        fork = await b.fork(conv)
        await b.drive(fork.id, approval_mode="ask")
        assert await run_to_end(b, fork.id, "and now?") == "completed"
        assert "t__echo" in names(provider_b.requests[-1])
    finally:
        await b.close()


async def test_a_server_down_is_named_by_the_search_and_its_loaded_tool_refused(tmp_path):
    """t's tool is loaded; after a restart t cannot start: its tool is not offered, a
    call of it is one line (no approval asked), and a search says t is down. Then t is
    taken out of the config: a call of its tool is one line too."""
    harness, conv, _ = await start(tmp_path, [turn(SEARCH_TOOL, query="t__echo"),
                                              ScriptedTurn(text="found")])  # fmt: skip
    try:
        assert await run_to_end(harness, conv) == "completed"
    finally:
        await harness.close()
    turns = [turn("t__echo", text="hi"), turn(SEARCH_TOOL, query="echo"), ScriptedTurn(text="ok")]
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, {"t": DOWN, "gh": CATALOG})
    try:
        await harness.drive(conv, interactive=True, approval_mode="ask")
        assert await run_to_end(harness, conv, "again") == "completed"
        assert "t__echo" not in names(provider.requests[0])
        refused = told(provider, 1)
        assert refused.startswith("REFUSED UNAVAILABLE: MCP server t is failed (did not start")
        assert "t__echo cannot be called now" in refused and len(refused.splitlines()) == 2
        searched = told(provider, 2)
        assert "No MCP tool matches 'echo' (33 searched)" in searched
        assert "note: MCP server t is failed (did not start: " in searched
    finally:
        await harness.close()
    provider = ScriptedProvider([turn("t__echo", text="hi"), ScriptedTurn(text="ok")])
    harness = await open_harness(tmp_path, provider, {"gh": CATALOG})  # t is gone from config
    try:
        await harness.drive(conv, interactive=True, approval_mode="ask")
        assert await run_to_end(harness, conv, "once more") == "completed"
        assert "t__echo" not in names(provider.requests[0])
        assert told(provider, 1).startswith("REFUSED INVALID_ARGUMENT: there is no tool named")
    finally:
        await harness.close()
