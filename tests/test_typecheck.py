"""mypy strict over runtime/, tools/, tui/ and themes/ (pyproject's [tool.mypy]).

This is what holds the front ends to the one protocol: each holds a
`runtime.HarnessClient`, whose methods are typed one per op (no `*args`
pass-throughs), and the server applies each op through the harness's own typed
call; a wrong argument fails here, not in a user's terminal.
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


def test_every_package_type_checks_strict_and_a_wrong_op_call_fails(tmp_path):
    """One mypy run (a full strict analysis is ~12 s of CPU; the two checks used to be
    two runs, each analysing the whole runtime): the packages and a sample that calls
    two ops wrongly. Every error is the sample's, and each wrong call is one."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from runtime import HarnessClient\n"
        "async def use(client: HarnessClient) -> None:\n"
        "    await client.submit(1, 2, 3, wrong=True)\n"
        "    await client.respond('c', 'call', approve='yes')\n"
    )
    out = mypy("runtime", "tools", "tui", "themes", str(sample))
    assert out.returncode == 1, out.stdout + out.stderr
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    # (By name: mypy's cache keeps a module's errors under the path it was first
    # checked at, another run's tmp_path when the sample is unchanged.)
    assert errors and all(Path(line.split(":")[0]).name == sample.name for line in errors), (
        out.stdout
    )
    assert 'Unexpected keyword argument "wrong"' in out.stdout
    assert 'Argument 1 to "submit" of "HarnessClient" has incompatible type "int"' in out.stdout
    assert '"respond" of "HarnessClient" has incompatible type "str"; expected "bool"' in out.stdout
