"""Background jobs with the real `bastion` (issue 39): `-p` ends a job its answer
left running (stderr, json `jobs`); a SIGKILL of the driver's process group with two
jobs running leaves nothing of either, and the resume tells the model both ended,
each with its last output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.testing.pids import host_pids
from runtime.testing.waiting import alive, wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process tracking"),
]

SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d39"
JOB = """import os, sys, time
name = sys.argv[1]
open(name + ".pid", "w").write(str(os.getpid()))
print(name, "ready", flush=True)
i = 0
while True:
    i += 1
    print(name, "tick", i, flush=True)
    with open(name + ".ticks", "a") as fh:
        fh.write("tick\\n")
    time.sleep(0.1)  # the job: a server ticking until it is killed
"""


SLEEPS = {"a": 1039, "b": 1040}  # (told apart by their arguments: see our_pids)


def job(name: str) -> str:
    """A job with a setsid grandchild beside it: its whole tree must go."""
    sleep = SLEEPS[name]
    return f"setsid sleep {sleep} & echo $! > {name}_child.pid; exec python3 job.py {name}"


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def calls(*items: tuple[str, str, dict]) -> dict:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def ticks(cwd: Path, name: str) -> int:
    path = cwd / f"{name}.ticks"
    return path.read_text().count("\n") if path.exists() else 0


def our_pids(cwd: Path, names: tuple[str, ...]) -> dict[str, int] | None:
    """Our pids of what the jobs wrote down, once all did. Each job has a PID namespace
    of its own, so two jobs' pids may be alike: a process is told by its arguments too
    (`job.py a`, `sleep 1039`)."""
    found = {}
    for name in names:
        try:
            inner = int((cwd / name).read_text())
        except (FileNotFoundError, ValueError):
            return None
        key = name[0]
        mark = str(SLEEPS[key]) if "child" in name else f"job.py\0{key}"
        mapped = [p for p in host_pids(inner, cwd) if mark in _cmdline(p)]
        if len(mapped) != 1:
            return None
        found[name] = mapped[0]
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def test_print_mode_ends_a_job_still_running_when_the_answer_is_done(loopback, bastion):
    server = loopback(
        [call("c1", "run_command", command=job("a"), background=True), {"text": "it runs"}]
    )
    b = bastion(server)
    (b.cwd / "job.py").write_text(JOB)
    out = b.run("-p", "start it", "--output-format", "json", "--approval-mode", "full-auto")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["result"] == "it runs"
    [ended] = result["jobs"]
    assert ended["id"] == "job_1" and ended["state"] == "stopped"
    assert ended["command"] == job("a") and "a ready" in ended["last_output"]
    assert "-p ends the jobs" in ended["reason"]
    assert "ended 1 background job still running when the answer was done: job_1" in out.stderr
    pids = our_pids(b.cwd, ("a.pid", "a_child.pid"))
    assert pids is None or not any(alive(p) for p in pids.values())
    count = ticks(b.cwd, "a")
    time.sleep(0.3)  # (the thing under test: nothing ticks meanwhile)
    assert ticks(b.cwd, "a") == count
    # The model hears of it on the next turn.
    again = loopback([{"text": "noted"}])
    b = bastion(again)
    out = b.run("-p", "--resume", result["session_id"], "and now?")
    assert out.returncode == 0, out.stderr
    said = [m["content"] for m in again.requests()[-1]["messages"] if m["role"] == "user"]
    assert any("job_1" in str(s) and "-p ends the jobs" in str(s) for s in said)


def test_a_killed_driver_leaves_no_job_and_the_resume_tells_the_model(loopback, bastion):
    server = loopback(
        [
            calls(
                ("c1", "run_command", {"command": job("a"), "background": True}),
                ("c2", "run_command", {"command": job("b"), "background": True}),
            ),
            call("c3", "run_command", command="touch fg.started; sleep 1041"),  # the run goes on
            {"text": "resumed"},
        ]
    )
    b = bastion(server)
    (b.cwd / "job.py").write_text(JOB)
    proc = subprocess.Popen(
        b.cmd("-p", "--session-id", SID, "start both", "--approval-mode", "full-auto"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=b.cwd, env=b.env,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    names = ("a.pid", "a_child.pid", "b.pid", "b_child.pid")
    found: dict[str, int] = {}
    try:
        found = wait_for(lambda: our_pids(b.cwd, names), "both jobs and their children")
        wait_for(lambda: ticks(b.cwd, "a") >= 5 and ticks(b.cwd, "b") >= 5, "both jobs to tick")
        wait_for(lambda: (b.cwd / "fg.started").exists(), "the run's next command")
        os.killpg(proc.pid, signal.SIGKILL)  # the driver's whole process group
        proc.wait(timeout=10)
        wait_for(lambda: not any(alive(p) for p in found.values()), "both job trees to go", 10)
        count = ticks(b.cwd, "a"), ticks(b.cwd, "b")
        time.sleep(0.3)  # (the thing under test: nothing ticks meanwhile)
        assert (ticks(b.cwd, "a"), ticks(b.cwd, "b")) == count
    finally:
        with_kill(proc, found)
    out = b.run("-p", "--resume", SID)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "resumed\n"
    said = [str(m["content"]) for m in server.requests()[-1]["messages"] if m["role"] == "user"]
    [note] = [s for s in said if "ended when the previous bastion process stopped" in s]
    for name in ("a", "b"):
        assert f"`{job(name)}`" in note
        assert f"{name} ready" in note or f"{name} tick" in note  # its last output
    assert note.index("job_1") < note.index("job_2")


def with_kill(proc: subprocess.Popen[str], found: dict[str, int]) -> None:
    """Clean up after a failed test: nothing of it may outlive the suite."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pid in found.values():
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
