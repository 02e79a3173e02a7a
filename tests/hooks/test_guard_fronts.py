"""Issue 37 item 2: a PreToolUse hook that crashes blocks its call in every front end:
the app, `--plain` and `-p` (the harness decides; each front end shows the block)."""

from __future__ import annotations

import io
import json
import os
import subprocess

from runtime.testing.server import LoopbackServer
from tests.hooks.helpers import command, open_session
from tests.tui.conftest import SIZE, app_over, client_of, run_settled, wait_for

TURNS = [{"tool_calls": [command("echo ran > out.txt")]}, {"text": "done"}]
CRASH = {"PreToolUse": [{"command": "python3 -c 'raise SystemExit(\"guard crashed\")'"}]}


async def test_the_app_shows_the_blocked_call(tmp_path):
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, CRASH)
        app = app_over(s.harness, s.conversation_id, first_prompt="go")
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_for(lambda: run_settled(app), pilot)
                notes = [e.text for e in app.view.entries if "hook" in e.data]
        finally:
            await s.harness.close()
    assert not (s.workspace / "out.txt").exists()
    assert any("the call is blocked" in n for n in notes), notes


async def test_the_line_mode_shows_the_blocked_call(tmp_path):
    from rich.console import Console

    from tests.tui.test_plain import Keyboard
    from tui.plain import LineMode

    out = io.StringIO()
    con = Console(file=out, width=200, force_terminal=False, color_system=None)
    async with LoopbackServer(TURNS) as server:
        s = await open_session(tmp_path, server, CRASH)
        try:
            client = await client_of(s.harness)
            await LineMode(client, s.conversation_id, con, Keyboard("go")).loop()
        finally:
            await s.harness.close()
    assert not (s.workspace / "out.txt").exists()
    assert "the call is blocked" in out.getvalue()


def test_print_mode_refuses_the_call_and_says_why(tmp_path):
    from runtime.testing.process import LoopbackThread
    from tests.e2e.conftest import bastion_bin

    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "config" / "bastion"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        "[[hooks.PreToolUse]]\ncommand = \"python3 -c 'raise SystemExit(1)'\"\n"
    )
    with LoopbackThread.start(TURNS, tmp_path / "server") as server:
        env = {**os.environ, "BASTION_HOME": str(tmp_path / "home"),
               "XDG_CONFIG_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "k",
               "OPENAI_BASE_URL": server.base_url}  # fmt: skip
        out = subprocess.run(
            [bastion_bin(), "-p", "go", "--model", "openai/m", "--approval-mode", "full-auto",
             "--output-format", "json"],
            cwd=work, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert not (work / "out.txt").exists()
    assert "the call is blocked" in out.stderr, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed"
