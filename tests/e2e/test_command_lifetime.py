"""No command outlives the bastion that started it: the real command, SIGKILLed or
SIGHUPed while a model's run_command runs a loop with background, setsid and
double-forked descendants; then the resume."""

from __future__ import annotations

import os
import signal
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

SID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d11"
DOUBLE_FORK = """import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open("fork.pid", "w").write(str(os.getpid()))
        os.execvp("sleep", ["sleep", "1014"])
    os._exit(0)
os.wait()
"""
COMMAND = (
    "echo $$ > main.pid; sleep 1014 & echo $! > bg.pid; "
    "setsid sleep 1014 & echo $! > setsid.pid; "
    "setsid -f sh -c 'echo $$ > setsid_f.pid; exec sleep 1014'; "
    f"{sys.executable} double_fork.py; "
    "i=0; while :; do i=$((i+1)); echo tick $i; echo tick >> counter.txt; sleep 0.1; done"
)
PIDS = ("main.pid", "bg.pid", "setsid.pid", "setsid_f.pid", "fork.pid")


def call(call_id, name, **arguments):
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def pids(cwd: Path) -> dict[str, int] | None:
    try:
        return {name: int((cwd / name).read_text()) for name in PIDS}
    except (FileNotFoundError, ValueError):
        return None


def ours(cwd: Path, found: dict[str, int]) -> dict[str, int]:
    """Our pids of the processes the command wrote down (its PID namespace's pids)."""
    mapped = {name: host_pids(pid, cwd) for name, pid in found.items()}
    assert all(len(p) == 1 for p in mapped.values()), mapped
    return {name: p[0] for name, p in mapped.items()}


def ticks(cwd: Path) -> int:
    path = cwd / "counter.txt"
    return path.read_text().count("\n") if path.exists() else 0


def kill_and_check(b, sig: int, after: int = 3) -> None:
    """Kill bastion with `sig` once the command has ticked `after` times."""
    (b.cwd / "double_fork.py").write_text(DOUBLE_FORK)
    proc = b.popen("-p", "--session-id", SID, "go", "--approval-mode", "full-auto")
    found: dict[str, int] = {}
    try:
        found = ours(b.cwd, wait_for(lambda: pids(b.cwd)))
        wait_for(lambda: ticks(b.cwd) >= after)
        proc.send_signal(sig)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in found.values()) and time.monotonic() < deadline:
            time.sleep(0.05)  # (poll interval)
        assert {n: p for n, p in found.items() if alive(p)} == {}
        count = ticks(b.cwd)
        time.sleep(0.5)  # (the thing under test: nothing ticks meanwhile)
        assert ticks(b.cwd) == count  # nothing still runs the loop
    finally:
        proc.kill()
        proc.wait()
        for pid in found.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_nothing_of_a_command_survives_the_death_of_bastion(loopback, bastion, sig):
    server = loopback([call("c1", "run_command", command=COMMAND), {"text": "resumed"}])
    b = bastion(server)
    kill_and_check(b, sig)
    out = b.run("-p", "--resume", SID)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "resumed\n"
    count = ticks(b.cwd)
    time.sleep(0.3)  # (the thing under test: nothing ticks meanwhile)
    assert ticks(b.cwd) == count  # the resume did not run it again either


def test_the_resume_tells_the_model_the_output_before_the_kill(loopback, bastion):
    server = loopback([call("c1", "run_command", command=COMMAND), {"text": "resumed"}])
    b = bastion(server)
    # Killed three ticks after tick 3 was printed: what bastion had read by then is kept
    # (a line still unread in the pipe when bastion dies is lost with it; on a loaded
    # machine killing at tick 3 itself could catch it there).
    kill_and_check(b, signal.SIGKILL, after=6)
    out = b.run("-p", "--resume", SID)
    assert out.returncode == 0, out.stderr
    told = next(m for m in server.requests()[-1]["messages"] if m["role"] == "tool")["content"]
    assert "tick 1\ntick 2\ntick 3" in told
