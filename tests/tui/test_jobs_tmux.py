"""A background job in the real app, in a real terminal (issue 39): the model starts a
web server in the background, the app shows it running, the model reads its output in
a later turn, the user stops it from the app, and no process of it is left."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread
from tests.tui.test_tmux import bastion_bin, environment, tmux, wait_exit  # noqa: F401
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def type_line(tmux, line: str) -> None:  # noqa: F811
    """Type `line`, and press Enter once the prompt shows it (not while the keys are
    still arriving, when Enter may land in the command completions)."""
    tmux.send(line, literal=True)
    tmux.wait_for(lambda s: f"│ {line} " in s, f"{line!r} in the prompt")
    tmux.send("Enter")


def server_pids(cwd: Path) -> list[int]:
    """The web server's processes: told by the folder it serves (this test's own)."""
    out = subprocess.run(["pgrep", "-f", f"http.server .*{cwd}"], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def test_the_model_starts_a_server_reads_it_later_and_the_user_stops_it(tmp_path, tmux):  # noqa: F811
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "hello.txt").write_text("hi\n")
    serve = f"python3 -u -m http.server 0 --bind 127.0.0.1 --directory {cwd}"
    turns = [
        call("c1", "run_command", command=serve, background=True),
        {"text": "The server is up."},
        call("c2", "read_output", id="job_1", wait=1),
        {"text": "It is still serving."},
    ]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        argv = [bastion_bin(), "--model", "openai/test", "--approval-mode", "full-auto"]
        exit_file = tmux.start([*argv, "--network"], environment(tmp_path, server), cwd)
        tmux.wait_for(lambda s: "type a request" in s, "the app to start")
        tmux.send("start a web server", literal=True)
        tmux.send("Enter")
        tmux.wait_for(lambda s: "The server is up." in s, "the first answer")
        tmux.wait_for(lambda s: " 1 job  ·" in s, "the running job on the status line")
        assert server_pids(cwd)  # (the server, and the shell and supervisor naming it)
        started = [m for m in server.requests()[-1]["messages"] if m["role"] == "tool"][-1]
        port = re.search(r"Serving HTTP on 127\.0\.0\.1 port (\d+)", started["content"])
        assert port, started["content"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port[1]}/hello.txt", timeout=10) as r:
            assert r.read() == b"hi\n"  # (the job prints a line for it: read in a later turn)

        type_line(tmux, "/jobs")
        screen = tmux.wait_for(lambda s: "background jobs" in s, "the jobs list")
        assert "running" in screen and "http.server" in screen

        type_line(tmux, "is it still up?")  # (a lost key fails here, named as such)
        tmux.wait_for(lambda s: "It is still serving." in s, "the second answer")
        [read] = [m for m in server.requests()[-1]["messages"] if m["role"] == "tool"][-1:]
        assert '"GET /hello.txt HTTP/1.1" 200' in read["content"]

        tmux.wait_for(lambda s: "● done" in s, "the second run to end")
        type_line(tmux, "/jobs 1")  # its output so far
        tmux.wait_for(lambda s: "job_1 running" in s and "Serving HTTP" in s, "job 1's output")
        type_line(tmux, "/jobs stop 1")
        tmux.wait_for(lambda s: "stopped" in s and " 1 job  ·" not in s, "the job stopped")
        deadline = time.monotonic() + 10
        while server_pids(cwd):
            if time.monotonic() > deadline:
                pytest.fail(f"the web server is still running: {server_pids(cwd)}")
            time.sleep(0.1)  # (poll interval)
        tmux.send("C-c")
        tmux.send("C-c")
        assert wait_exit(exit_file) == 0
