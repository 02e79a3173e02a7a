"""Issue 25, item 3: killing the app while its harness process opens the session
leaves no traceback in harness.log (the child's writes to the gone app used to end
in ConnectionResetError tracebacks), and the harness process still exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from runtime.testing.waiting import alive

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

APP = textwrap.dedent(
    """
    import sys, time
    from tui.child import Child
    from tui.cli import main_parser
    child = Child.start(main_parser().parse_args(sys.argv[1:]), check_model=True)
    child.drive()
    print(child.process.pid, flush=True)
    time.sleep(60)  # (the thing under test: an app killed while it runs)
    """
)
# Killed at once, while opening, while driving, and after: each step's write to the app.
DELAYS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6, 0.9)


@pytest.mark.parametrize("delay", DELAYS)
@pytest.mark.parametrize("continuing", [False, True], ids=["new", "continue-none"])
def test_stray_tracebacks_killing_the_app_during_start_up_logs_none(tmp_path, continuing, delay):
    """Each moment its own test, so the workers share them out."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    work.mkdir()
    env = {
        **os.environ,
        "BASTION_HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    # `-c` with nothing to continue fails to open: the child reports it to a gone app.
    args = ["--model", "openai/test", *(["-c"] if continuing else [])]
    app = subprocess.Popen(
        [sys.executable, "-c", APP, *args], cwd=work, env=env, stdout=subprocess.PIPE, text=True
    )
    assert app.stdout is not None
    harness = int(app.stdout.readline())
    time.sleep(delay)  # the moment of the kill is what is tested
    app.kill()
    app.wait()
    app.stdout.close()
    deadline = time.monotonic() + 30
    while alive(harness) and time.monotonic() < deadline:
        time.sleep(0.02)  # (poll interval)
    assert not alive(harness), f"the harness process outlived the app (killed at {delay} s)"
    log = home / "harness.log"
    text = log.read_text() if log.exists() else ""
    assert "Traceback" not in text, text[-3000:]
