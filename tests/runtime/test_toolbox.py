"""runtime.run.toolbox's process-lifetime surface: what a resume calls after a crash.

A host process runs run_command through WorkspaceToolbox and hands the
``on_start`` record out (the runtime commits it to the store); it is SIGKILLed;
then, as a resume would, ``reap_processes(record)`` and ``interrupted_output``.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from runtime.run.toolbox import WorkspaceToolbox, reap_processes
from runtime.testing.pids import host_pids

ROOT = pathlib.Path(__file__).parents[2]
HOST = """
import asyncio, json, sys
from pathlib import Path
from runtime.run.toolbox import WorkspaceToolbox

async def main():
    box = WorkspaceToolbox(sys.argv[1], Path(sys.argv[2]))
    args = json.dumps({"command": sys.argv[3]})
    await box.run("run_command", args, on_start=lambda r: print(json.dumps(r), flush=True))

asyncio.run(main())
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process tracking")
def test_a_resume_finds_nothing_running_and_the_output_before_the_kill(tmp_path):
    root, artifacts = tmp_path / "ws", tmp_path / "artifacts"
    root.mkdir()
    artifacts.mkdir()
    script = "setsid sleep 1013 & echo $! > s.pid; for i in 1 2 3; do echo line $i; done; sleep 60"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(root), str(artifacts), script],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert host.stdout is not None
        record = json.loads(host.stdout.readline())
        box = WorkspaceToolbox(str(root), artifacts)
        deadline = time.monotonic() + 10
        while "line 3" not in (box.interrupted_output(record) or ""):
            assert time.monotonic() < deadline, "the output never reached the artifact"
            time.sleep(0.02)  # (poll interval)
        # (the command's PID namespace numbers it otherwise)
        [pid] = host_pids(int((root / "s.pid").read_text()), root)
        os.kill(record["supervisor_pid"], signal.SIGSTOP)  # leave the work to the resume
        host.kill()
        host.wait(10)
        assert alive(pid) and alive(record["pid"])
        reaped = reap_processes(record)
        assert not alive(pid) and not alive(record["pid"])
        assert {pid, record["pid"], record["supervisor_pid"]} <= {p for p, _ in reaped["killed"]}
        assert reaped["remaining"] == [] and reaped["note"] == ""
        assert box.interrupted_output(record) == "line 1\nline 2\nline 3\n"
        assert box.interrupted_output({"output_id": "out_" + "0" * 32}) is None
        box.close()
    finally:
        host.kill()
        host.wait()
