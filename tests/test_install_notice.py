"""The install says when the fast search path is skipped (issue 38).

pip hides a build backend's output unless the build fails, so `setup.py` writes
its notice to the installing terminal as well as stderr. These build
`tools._native` with a compiler that always fails (CC=false, as on a machine
without one) into a temporary folder, once on a pseudo-terminal and once without
a terminal, and read what a user would see.
"""

from __future__ import annotations

import fcntl
import os
import pty
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTICE = "the fast search path (tools._native) was not built"


def build_argv(out: Path) -> list[str]:
    return [
        sys.executable,
        "setup.py",
        "-q",
        "build_ext",
        "--build-temp",
        str(out / "temp"),
        "--build-lib",
        str(out / "lib"),
    ]


def failing_compiler_env() -> dict[str, str]:
    return {**os.environ, "CC": "false", "CXX": "false", "LDSHARED": "false"}


def take_terminal() -> None:
    """In the child: its stdin, the pseudo-terminal, becomes its controlling
    terminal, as a user's terminal is pip's and so its build backend's."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its side of the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_notice_reaches_the_installing_terminal(tmp_path: Path) -> None:
    """With stdout and stderr captured (as pip does), the terminal still sees it."""
    main, side = pty.openpty()
    child = subprocess.Popen(
        build_argv(tmp_path),
        cwd=ROOT,
        env=failing_compiler_env(),
        stdin=side,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    os.close(side)
    _out, err = child.communicate(timeout=120)
    seen = read_all(main).decode(errors="replace")
    os.close(main)
    assert child.returncode == 0, err.decode()  # optional: the install goes on
    assert NOTICE in seen
    assert "apt-get install libre2-dev" in seen and "bastion doctor" in seen
    assert NOTICE in err.decode()
    assert not list((tmp_path / "lib").rglob("_native*"))


def build_without_a_terminal(out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        build_argv(out), cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, start_new_session=True, timeout=300,
    )  # fmt: skip


def test_without_a_terminal_the_notice_goes_to_stderr(tmp_path: Path) -> None:
    done = build_without_a_terminal(tmp_path, failing_compiler_env())
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(NOTICE) == 1
    assert NOTICE not in done.stdout


@pytest.mark.skipif(
    not Path("/usr/include/re2/re2.h").exists(), reason="RE2's headers are not installed"
)
def test_a_build_that_works_says_nothing(tmp_path: Path) -> None:
    done = build_without_a_terminal(tmp_path, dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert NOTICE not in done.stderr
    assert list((tmp_path / "lib").rglob("_native*"))
