"""Issue 34 item 2: code bastion runs cannot answer approvals through a session's socket.

The red team's command (network off, workspace-write; same uid, so the old peer
check passed) connected to `$BASTION_HOME/sockets/<id>.sock`, read the transcript
and answered a pending call with `approve: true, sandbox: "outside"`. Here a real
command, started through `run_command` under bastion's supervisor (with no sandbox
at all, so only the socket's own door is tested: the sandbox also hides the
folder), finds the socket and its token and tries exactly that; so does a process
the serving harness itself started. Both are refused and the call stays pending. A
process the user started elsewhere (here: not a descendant of the harness) is let
in with the token, and refused without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from runtime.ipc.listen import socket_path
from runtime.ipc.peer import read_token
from runtime.model.llm import ToolCall
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness, until_awaiting_approval
from tools import ToolContext, Workspace, run_tool

ATTACK = textwrap.dedent(
    """
    import json, socket, sys
    path, call_id, token = sys.argv[1], sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("rb")
    hello = json.dumps({"hello": {"version": 1, "client": "attack", "token": token}})
    respond = json.dumps({"id": 1, "op": "respond", "args": {
        "conversation": sys.argv[4], "tool_call": call_id, "approve": True,
        "sandbox": "outside"}})
    try:
        s.sendall(((hello + "\\n") if token != "-" else "").encode() + respond.encode() + b"\\n")
    except BrokenPipeError:
        pass  # refused before it read: its one line is still there to read
    for raw in f:
        message = json.loads(raw)
        if message.get("hello", 1) is None:  # the hello refused: why
            print(json.dumps({"ok": False, "error": message["error"]}))
            break
        if message.get("id") == 1:
            print(json.dumps(message))
            break
    """
)


async def pending_call(tmp_path: Path):
    turn = ScriptedTurn(tool_calls=(ToolCall("c1", "run_command", '{"command": "touch pwned"}'),))
    harness = await open_harness(tmp_path, ScriptedProvider([turn]), RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id, interactive=True)
    await harness.submit(conv.id, "go")
    snap = await until_awaiting_approval(harness, conv.id)
    return harness, conv.id, snap.tool_calls[0].id


async def still_pending(harness, conv_id: str, call_id: str) -> bool:
    snap = await harness.store.snapshot(conv_id)
    call = next(c for c in snap.tool_calls if c.id == call_id)
    return call.approval == "pending"


async def test_a_command_bastion_runs_cannot_approve_a_pending_call(tmp_path):
    harness, conv_id, call_id = await pending_call(tmp_path)
    path = socket_path(harness.home, conv_id)
    token = read_token(path) or "-"
    script = tmp_path / "attack.py"
    script.write_text(ATTACK)
    try:
        with Workspace.open(tmp_path) as ws:
            ctx = ToolContext(ws)  # unsandboxed: only the socket's door stands here
            argv = [sys.executable, str(script), str(path), call_id, token, conv_id]
            result = await run_tool("run_command", {"argv": argv}, ctx)
        reply = json.loads(result.data.get("output", "") or result.model_text().splitlines()[-1])
        assert reply["ok"] is False and reply["error"]["code"] == "peer_refused", reply
        assert "a process bastion started" in reply["error"]["message"]
        assert await still_pending(harness, conv_id, call_id)
    finally:
        await harness.close()


async def test_a_process_the_harness_started_cannot_approve_either(tmp_path):
    harness, conv_id, call_id = await pending_call(tmp_path)
    path = socket_path(harness.home, conv_id)
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", ATTACK, str(path), call_id, read_token(path) or "-", conv_id,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(child.communicate(), 30)
        reply = json.loads(out)
        assert reply["ok"] is False and reply["error"]["code"] == "peer_refused"
        assert await still_pending(harness, conv_id, call_id)
    finally:
        await harness.close()


def _detached(argv: list[str], out: Path) -> None:
    """Run `argv` as an orphan (its parent exits): not a descendant of this process,
    as the user's own `bastion attach` in another terminal is not."""
    launcher = (
        "import os, subprocess, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    with open({str(out)!r}, 'wb') as fh:\n"
        "        subprocess.run(sys.argv[1:], stdout=fh)\n"
        "    os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", launcher, *argv], check=True, timeout=30)


async def test_the_users_own_client_needs_the_token(tmp_path):
    harness, conv_id, call_id = await pending_call(tmp_path)
    path = socket_path(harness.home, conv_id)
    script = tmp_path / "client.py"
    script.write_text(ATTACK)
    try:
        replies = {}
        for name, token in (("without", "wrong-token"), ("with", read_token(path) or "-")):
            out = tmp_path / f"{name}.json"
            _detached([sys.executable, str(script), str(path), call_id, token, conv_id], out)
            for _ in range(1500):  # the orphan answers on its own time: wait for its line
                if out.exists() and out.read_bytes().endswith(b"\n"):
                    break
                await asyncio.sleep(0.02)  # (poll interval)
            replies[name] = json.loads(out.read_text())
        assert replies["without"]["ok"] is False
        assert replies["without"]["error"]["code"] == "peer_refused"
        assert "token" in replies["without"]["error"]["message"]
        assert replies["with"]["ok"] is True  # the user's client may answer
        assert not await still_pending(harness, conv_id, call_id)
    finally:
        await harness.close()


def test_the_token_file_is_private(tmp_path):
    from runtime.ipc.peer import TokenFile

    sock = tmp_path / "x.sock"
    token = TokenFile(sock)
    token.write()
    assert oct(os.stat(token.path).st_mode & 0o777) == "0o600"
    assert read_token(sock) == token.token and len(token.token) == 64
    token.remove()
    assert read_token(sock) is None
