"""Issue 25, item 14: `bastion -c` right after a `kill -9` takes the session over.

The killed process is not reaped yet (its parent, here the test, has not waited for
it): its pid is a zombie, which used to count as a live driver, and `-c` exited 2,
"driven by another bastion process".
"""

from __future__ import annotations

import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from runtime.testing.waiting import wait_for

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

SLOW = {"text": "a slow answer " * 40, "chunk_size": 4, "delay_ms": 30}


def streaming(home: Path) -> bool:
    """An answer is streaming, part of it committed (read straight from the file)."""
    try:
        db = sqlite3.connect(f"file:{home / 'bastion.sqlite'}?mode=ro", uri=True)
    except sqlite3.OperationalError:  # not made yet
        return False
    try:
        found = db.execute(
            "SELECT 1 FROM entries JOIN chunks ON chunks.owner_id = entries.id "
            "WHERE entries.kind = 'assistant' AND entries.status = 'streaming' LIMIT 1"
        ).fetchone()
    except sqlite3.OperationalError:  # not made yet
        return False
    finally:
        db.close()
    return found is not None


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_zombie_driver_continue_right_after_kill_9_takes_the_session_over(loopback, bastion):
    server = loopback([SLOW, {"text": "the resumed answer", "repeat": True}])
    b = bastion(server)
    killed = b.popen("-p", "--output-format", "json", "go")
    try:
        deadline = time.monotonic() + 30
        wait_for(lambda: streaming(b.home), "the first answer to stream (its lease held)")
        killed.send_signal(signal.SIGKILL)
        while state(killed.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)  # (poll interval)
        assert state(killed.pid) == "Z"  # not reaped: its pid still exists
        out = b.run("-p", "-c", "--output-format", "json", timeout=60)
        assert state(killed.pid) == "Z"
    finally:
        killed.kill()
        killed.communicate()
    assert out.returncode == 0, out.stderr
    assert "driven by another" not in out.stderr
    assert "the resumed answer" in out.stdout
