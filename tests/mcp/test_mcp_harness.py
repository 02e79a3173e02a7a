"""MCP tools in the harness, with the test server (tests/mcp/lean_server.py) over
stdio and a scripted model: approvals (asked by default, rules by tool or server),
an interrupt that cancels a running call, tools/list_changed, `mcp_servers()`."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from runtime import Harness
from runtime.model.llm import ToolCall
from runtime.model.results import ServerState
from runtime.model.rules import Rule, RuleKind
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.mcp.conftest import SERVER, stdio_server


def turn(tool: str, **arguments: object) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=(ToolCall("c1", tool, json.dumps(arguments)),))


async def start(tmp_path: Path, turns: list[ScriptedTurn], *, approval: str = "ask",
                allow: tuple[str, ...] = (), **table: object,
                ) -> tuple[Harness, str, ScriptedProvider]:  # fmt: skip
    provider = ScriptedProvider(turns)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    harness = await Harness.open(
        tmp_path / "home" / "bastion.sqlite",
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, tmp_path / "artifacts"),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=Config(mcp_servers={"t": stdio_server(**table)}),
    )
    conv = await harness.create_conversation(str(work), settings={"model": "s/m"})
    await harness.drive(conv.id, interactive=True, approval_mode=approval, allow=allow)
    return harness, conv.id, provider


async def until_asked(harness: Harness, conversation_id: str, timeout: float = 60.0) -> Any:
    """The snapshot once the newest run asks for approval. The first request waits for
    the server to start (the client's SDK import, then the server), seconds on a
    loaded machine, so this waits longer than tests.runtime.helpers' 4 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snap = await harness.store.snapshot(conversation_id)
        if snap.runs and snap.runs[-1].state == "awaiting_approval":
            return snap
        await asyncio.sleep(0.02)  # (poll interval)
    raise AssertionError("the run never asked for approval")


async def appears(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        await asyncio.sleep(0.01)  # (poll interval)


def told(provider: ScriptedProvider, request: int = -1) -> str:
    content = provider.requests[request].messages[-1].content
    return content if isinstance(content, str) else str(content)


async def test_an_mcp_call_asks_by_default_and_runs_once_approved(tmp_path):
    harness, conv, provider = await start(
        tmp_path, [turn("t__echo", text="hi"), ScriptedTurn(text="done")], approval="auto-edit"
    )
    try:
        item = await harness.submit(conv, "go")
        snap = await until_asked(harness, conv)
        (pending,) = snap.tool_calls
        assert pending.name == "t__echo" and pending.approval == "pending"
        assert pending.replay_safe is False
        await harness.respond(conv, pending.id, approve=True)
        run = await harness.wait(item.id, conv)
        assert run.state == "completed" and told(provider) == "echo: hi"
        asked = next(e for e in (await harness.snapshot(conv)).entries if e.kind == "user")
        plan = await harness.restore_plan(conv, asked.id)  # a rewind cannot undo it, and says so
        assert any("t__echo" in line and "MCP server t" in line for line in plan.cannot_undo)
    finally:
        await harness.close()


async def test_a_denied_mcp_call_tells_the_model_what_the_user_said(tmp_path):
    harness, conv, provider = await start(
        tmp_path, [turn("t__echo", text="hi"), ScriptedTurn(text="ok")]
    )
    try:
        item = await harness.submit(conv, "go")
        snap = await until_asked(harness, conv)
        await harness.respond(conv, snap.tool_calls[0].id, approve=False, message="not now")
        await harness.wait(item.id, conv)
        assert "denied t__echo" in told(provider) and "not now" in told(provider)
    finally:
        await harness.close()


async def test_always_saves_a_rule_naming_the_tool_and_a_server_rule_covers_all(tmp_path):
    turns = [turn("t__echo", text="a"), turn("t__echo", text="b"), ScriptedTurn(text="done")]
    harness, conv, provider = await start(tmp_path, turns)
    try:
        item = await harness.submit(conv, "go")
        snap = await until_asked(harness, conv)
        call_id = snap.tool_calls[0].id
        assert await harness.proposed_rules(conv, call_id) == (Rule(RuleKind.TOOL, "t__echo"),)
        await harness.respond(conv, call_id, approve=True, always="session")
        run = await harness.wait(item.id, conv)  # the second call ran under the saved rule
        assert run.state == "completed" and told(provider) == "echo: b"
    finally:
        await harness.close()
    harness, conv, provider = await start(
        tmp_path, [turn("t__env", name="HOME"), ScriptedTurn(text="ok")], allow=("t__*",)
    )
    try:
        run = await harness.wait((await harness.submit(conv, "go")).id, conv)
        assert run.state == "completed" and not told(provider, 1).startswith("REFUSED")
    finally:
        await harness.close()


async def test_an_interrupt_cancels_a_running_mcp_call_and_the_server_goes_on(tmp_path):
    marker = tmp_path / "slow-started"
    turns = [turn("t__slow", seconds=60, marker=str(marker)), turn("t__echo", text="still here"),
             ScriptedTurn(text="done")]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns, allow=("t__*",))
    try:
        item = await harness.submit(conv, "go")
        await appears(marker)
        await harness.interrupt(conv)
        run = await harness.wait(item.id, conv)
        assert run.state == "interrupted"
        # the server was told: its tool's own scope was cancelled
        await appears(Path(str(marker) + ".cancelled"))
        snap = await harness.store.snapshot(conv)
        assert [c.state for c in snap.tool_calls] == ["interrupted"]
        result = next(e for e in snap.entries if e.kind == "tool_result")
        assert "t__slow" in result.text and "effects are unknown" in result.text
        again = await harness.submit(conv, "again")
        assert (await harness.wait(again.id, conv)).state == "completed"
        assert told(provider) == "echo: still here"
    finally:
        await harness.close()


async def test_tools_list_changed_offers_the_new_tool_in_the_next_request(tmp_path):
    turns = [turn("t__grow"), turn("t__late"), ScriptedTurn(text="done")]
    harness, conv, provider = await start(tmp_path, turns, allow=("t__*",))
    try:
        first = {s.name for s in (await _specs_when_ready(harness))}
        assert "t__late" not in first
        run = await harness.wait((await harness.submit(conv, "go")).id, conv)
        assert run.state == "completed"
        assert "t__late" in {t.name for t in provider.requests[-1].tools}
        assert told(provider) == "late tool ran"
        (status,) = await harness.mcp_servers()
        assert status.state is ServerState.READY and "t__late" in status.tools
    finally:
        await harness.close()


async def _specs_when_ready(harness: Harness) -> tuple:
    statuses = await harness.mcp_servers(wait=True)
    assert [s.state for s in statuses] == [ServerState.READY]
    assert harness.mcp is not None
    return harness.mcp.specs()


async def test_mcp_servers_says_each_servers_state_and_tools(tmp_path):
    harness, _, _ = await start(tmp_path, [])
    try:
        (status,) = await harness.mcp_servers(wait=True)
        assert status.name == "t" and status.transport == "stdio"
        assert {"t__echo", "t__slow", "t__image", "t__crash"} <= set(status.tools)
        assert status.line().startswith("t (stdio: ") and "ready, 7 tools" in status.line()
    finally:
        await harness.close()
    assert status.state is ServerState.READY
    assert harness.mcp is not None
    assert [s.state for s in harness.mcp.status()] == [ServerState.STOPPED]


async def test_a_call_over_tool_timeout_is_cancelled_and_the_server_stays(tmp_path):
    turns = [turn("t__slow", seconds=60), turn("t__echo", text="after"), ScriptedTurn(text="ok")]
    harness, conv, provider = await start(tmp_path, turns, allow=("t__*",), tool_timeout=1)
    try:
        run = await harness.wait((await harness.submit(conv, "go")).id, conv)
        assert run.state == "completed"
        slow = provider.requests[1].messages[-1].content
        assert "REFUSED UNAVAILABLE: t__slow took longer than 1 s (tool_timeout)" in str(slow)
        assert told(provider) == "echo: after"
        assert [s.state for s in await harness.mcp_servers()] == [ServerState.READY]
    finally:
        await harness.close()


async def _until_server(harness: Harness, check: Any, timeout: float = 60.0) -> Any:
    """The server's status once `check(status)` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (status,) = await harness.mcp_servers()
        if check(status):
            return status
        await asyncio.sleep(0.02)  # (poll interval)
    raise AssertionError(f"the server never got there: {status}")


async def test_a_server_that_crashed_is_restarted_and_its_tools_come_back(tmp_path, monkeypatch):
    import runtime.mcp.client as client

    monkeypatch.setattr(client, "RESTART_DELAYS", (0.3, 0.3))
    turns = [turn("t__crash"), ScriptedTurn(text="it crashed"),
             turn("t__echo", text="back"), ScriptedTurn(text="done")]  # fmt: skip
    harness, conv, provider = await start(tmp_path, turns, allow=("t__*",))
    try:
        await harness.mcp_servers(wait=True)
        run = await harness.wait((await harness.submit(conv, "crash it")).id, conv)
        assert run.state == "completed"
        assert "REFUSED UNAVAILABLE" in told(provider, 1) and "crashing on purpose" in told(
            provider, 1
        )
        status = await _until_server(harness, lambda s: s.state is ServerState.READY)
        assert "t__echo" in status.tools and status.detail == ""
        run = await harness.wait((await harness.submit(conv, "again")).id, conv)
        assert run.state == "completed"
        assert told(provider) == "echo: back"
        assert "t__echo" in {t.name for t in provider.requests[-1].tools}
        log = (tmp_path / "home" / "mcp" / "t.log").read_text()
        assert "crashing on purpose" in log  # the restart appended: why it died is kept
    finally:
        await harness.close()


async def test_a_server_that_keeps_dying_is_given_up_on(tmp_path, monkeypatch):
    import runtime.mcp.client as client

    monkeypatch.setattr(client, "RESTART_DELAYS", (0.1, 0.1))
    monkeypatch.setattr(client, "HEARTBEAT", 0.2)  # (an idle server's death is noticed)
    harness, _, _ = await start(
        tmp_path, [], **{"args": [str(SERVER), "stdio", "--die-after", "1"]}
    )
    try:
        status = await _until_server(harness, lambda s: "gave up" in s.detail)
        assert status.state is ServerState.FAILED and status.tools == ()
        assert "; gave up after 2 restarts" in status.detail
        await asyncio.sleep(0.5)  # (the thing under test: no further attempt is made)
        (after,) = await harness.mcp_servers()
        assert after.state is ServerState.FAILED and after.detail == status.detail
    finally:
        await harness.close()


async def test_restart_false_leaves_a_failed_server_down(tmp_path, monkeypatch):
    import runtime.mcp.client as client

    monkeypatch.setattr(client, "RESTART_DELAYS", (0.1,))
    monkeypatch.setattr(client, "HEARTBEAT", 0.2)
    harness, _, _ = await start(
        tmp_path, [], restart=False, **{"args": [str(SERVER), "stdio", "--die-after", "1"]}
    )
    try:
        status = await _until_server(harness, lambda s: s.state is ServerState.FAILED)
        assert "restart" not in status.detail
        await asyncio.sleep(0.5)  # (the thing under test: it is not started again)
        assert [s.state for s in await harness.mcp_servers()] == [ServerState.FAILED]
    finally:
        await harness.close()


async def test_prompts_and_resources_are_listed_and_fetched(tmp_path):
    from runtime.model.errors import McpUnavailable

    harness, _, _ = await start(tmp_path, [])
    try:
        await harness.mcp_servers(wait=True)
        (review,) = await harness.mcp_prompts()
        assert (review.command, review.arguments, review.required) == (
            "mcp__t__review", ("file", "focus"), ("file",))  # fmt: skip
        assert review.description == "Review a file."
        assert await harness.mcp_prompt("t", "review", {"file": "x.py"}) == "Please review x.py."
        listed = {r.uri: r for r in await harness.mcp_resources()}
        assert set(listed) == {"notes://team/guide", "notes://team/huge", "notes://team/logo"}
        assert listed["notes://team/guide"].mention == "t:notes://team/guide"
        assert await harness.mcp_resource("t", "notes://team/guide") == (
            "GUIDE: tabs, never spaces.\n", "")  # fmt: skip
        text, note = await harness.mcp_resource("t", "notes://team/huge")
        assert len(text) == 256 * 1024 and note == "cut at 256 KiB of 300 KiB"
        refused = [
            ("t", "notes://team/../../etc/passwd", "lists no resource"),  # never asked for
            ("t", "notes://team/logo", "not text"),
            ("nope", "notes://team/guide", "no MCP server 'nope'"),
        ]
        for server, uri, said in refused:
            try:
                await harness.mcp_resource(server, uri)
            except McpUnavailable as exc:
                assert said in exc.message and "\n" not in exc.message
            else:
                raise AssertionError(f"{uri} was read")
        try:
            await harness.mcp_prompt("t", "review", {})
        except McpUnavailable as exc:
            assert exc.message == "/mcp__t__review needs file"
            assert exc.hint == "/mcp__t__review <file> <focus>"
        else:
            raise AssertionError("a prompt without its required argument was fetched")
    finally:
        await harness.close()
