"""One hook command, for real: the event on stdin, the workspace as cwd, the sandbox,
stdout and stderr apart and capped, and a time limit that kills everything it started.
Process tests: looped 20 times before each commit that touches them."""

from __future__ import annotations

import json

from runtime.hooks.process import OUTPUT_CAP, hook_env, run_hook
from tests.hooks.helpers import alive
from tools.sandbox import SandboxPolicy


async def run(tmp_path, command: str, payload: bytes = b"{}", timeout: float = 10.0):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    env = hook_env(str(ws), "PreToolUse")
    return ws, await run_hook(command, payload, str(ws), SandboxPolicy(), timeout, env)


async def test_stdin_cwd_env_and_the_two_streams(tmp_path):
    event = {"hook_event_name": "PreToolUse", "tool_input": {"command": "ls \u2028"}}
    ws, out = await run(
        tmp_path, 'cat; echo "$PWD $BASTION_HOOK_EVENT $CLAUDE_PROJECT_DIR" >&2; exit 3',
        json.dumps(event).encode(),
    )  # fmt: skip
    assert out.exit_code == 3 and json.loads(out.stdout) == event
    assert out.stderr.decode().split() == [str(ws), "PreToolUse", str(ws)]


async def test_a_hook_writes_the_workspace_but_not_outside_it(tmp_path):
    outside = tmp_path / "outside"
    ws, out = await run(tmp_path, f"echo in > inside; echo out > {outside}")
    assert (ws / "inside").read_text() == "in\n"
    assert not outside.exists() and out.exit_code != 0 and b"outside" in out.stderr


async def test_a_hook_that_never_reads_a_big_event_does_not_block(tmp_path):
    _, out = await run(tmp_path, "exit 0", b'"' + b"x" * (4 << 20) + b'"')
    assert out.exit_code == 0


async def test_huge_output_is_capped_and_read_to_its_end(tmp_path):
    _, out = await run(tmp_path, f"head -c {OUTPUT_CAP * 4} /dev/zero; echo done >&2")
    assert out.exit_code == 0 and out.stdout_over and len(out.stdout) == OUTPUT_CAP
    assert out.stderr == b"done\n"


async def test_the_time_limit_kills_the_hook_and_what_it_started(tmp_path):
    ws, out = await run(
        tmp_path, "sleep 300 & echo $! > bg.pid; echo $$ > me.pid; sleep 300", timeout=2
    )
    assert out.timed_out and out.exit_code is None
    assert not alive(ws / "bg.pid")
    assert not alive(ws / "me.pid")


async def test_a_missing_workspace_is_an_error_line(tmp_path):
    env = hook_env(str(tmp_path / "gone"), "Stop")
    out = await run_hook("true", b"{}", str(tmp_path / "gone"), SandboxPolicy(), 5, env)
    assert out.exit_code is None and "cannot be opened" in out.error
