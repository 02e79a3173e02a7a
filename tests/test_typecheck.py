"""mypy strict over runtime/, tools/, tui/ and themes/ (pyproject's [tool.mypy]).

This is what holds the front ends to the one harness contract: the app holds a
`runtime.api.HarnessAPI`, and `Harness`, `RemoteHarness` and `AttachedHarness`
are each checked against it, so a method one of them lacks fails here, not in a
user's terminal as an AttributeError.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_every_package_type_checks_strict():
    out = mypy()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout


def test_a_harness_missing_a_method_of_the_contract_fails_the_check(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from runtime.api import HarnessAPI\n"
        "from tui.attach_app import AttachedHarness\n"
        "class Partial(AttachedHarness):\n"
        "    rewind = None\n"
        "def check(h: Partial) -> HarnessAPI:\n"
        "    return h\n"
    )
    out = mypy("--strict", "--ignore-missing-imports", str(sample))
    assert out.returncode == 1
    assert "rewind" in out.stdout
