"""`bastion attach` while the app's harness process is parked (tui.parking), against
the real app in a terminal: the app's socket wakes the harness, which serves the
attach; a connection without the token wakes it too but is refused, and the app
itself never answers on the socket."""

from __future__ import annotations

import json
import subprocess
import sys

from runtime.testing.process import LoopbackThread
from runtime.testing.waiting import wait_for
from tests.tui.test_parking_tmux import SID, _app, _harness
from tests.tui.test_tmux import Tmux, bastion_bin, environment
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux

ATTACH = """
import asyncio, json, sys
from runtime import Connection, HarnessClient, PeerRefused, socket_path, default_home
from tui.attached import connect

async def main():
    if sys.argv[1] == "token":
        reached = await connect(sys.argv[2])
        guest, where = reached.client, reached.source
        view = await guest.snapshot(sys.argv[2])
        print(json.dumps({"where": where, "pid": guest.server_pid,
                          "texts": [e.text for e in view.entries]}))
        await guest.close()
    else:
        conn = await Connection.unix(str(socket_path(default_home(), sys.argv[2])))
        try:
            await HarnessClient.connect(conn, client="attach", token="0" * 64)
        except PeerRefused as exc:
            print(json.dumps({"refused": str(exc)}))

asyncio.run(main())
"""


def _attach(env: dict[str, str], how: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ATTACH, how, SID],
        env={**env, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[2])},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def test_attach_and_a_tokenless_connection_while_the_app_is_parked(tmp_path):
    term = Tmux(tmp_path)
    with LoopbackThread.start([{"text": "First answer."}], tmp_path / "server") as server:
        env = environment(tmp_path, server)
        config = tmp_path / "config" / "bastion"
        config.mkdir(parents=True)
        (config / "config.toml").write_text("idle_park = 0.5\n")  # (short: a test's wait)
        cwd = tmp_path / "work"
        cwd.mkdir()
        try:
            term.start([bastion_bin(), "--model", "openai/test", "--session-id", SID], env, cwd)
            term.wait_for(lambda s: "type a request" in s, "the app to start")
            term.send("one", literal=True)
            term.send("Enter")
            term.wait_for(lambda s: "First answer." in s and "done" in s, "the first answer")
            app = _app(term)
            wait_for(lambda: _harness(app) is None, "the harness process to park", timeout=20)
            refused = _attach(env, "none")  # woken, and refused by it
            assert "token" in refused["refused"]
            wait_for(lambda: _harness(app) is None, "it to park again", timeout=20)
            followed = _attach(env, "token")
            assert followed["where"] == "live" and followed["texts"] == ["one", "First answer."]
            assert followed["pid"] not in (None, app)  # the harness the app started, not it
            assert len(server.requests()) == 1
        finally:
            term.kill()
