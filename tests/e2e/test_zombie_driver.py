"""Issue 25, item 14: `bastion -c` right after a `kill -9` takes the session over.

The killed process is not reaped yet (its parent, here the test, has not waited for
it): its pid is a zombie, which used to count as a live driver, and `-c` exited 2,
"driven by another bastion process".
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

SLOW = {"text": "a slow answer " * 40, "chunk_size": 4, "delay_ms": 30}


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_zombie_driver_continue_right_after_kill_9_takes_the_session_over(loopback, bastion):
    server = loopback([SLOW, {"text": "the resumed answer", "repeat": True}])
    b = bastion(server)
    killed = b.popen("-p", "--output-format", "json", "go")
    try:
        deadline = time.monotonic() + 30
        while not server.requests() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests(), "the first run never reached the model"
        time.sleep(0.3)  # streaming, its lease held
        killed.send_signal(signal.SIGKILL)
        while state(killed.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state(killed.pid) == "Z"  # not reaped: its pid still exists
        out = b.run("-p", "-c", "--output-format", "json", timeout=60)
        assert state(killed.pid) == "Z"
    finally:
        killed.kill()
        killed.communicate()
    assert out.returncode == 0, out.stderr
    assert "driven by another" not in out.stderr
    assert "the resumed answer" in out.stdout
