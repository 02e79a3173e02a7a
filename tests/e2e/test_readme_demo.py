"""The README's no-key demo, pasted as it is into a fresh shell, answers.

It used to start the server in the background and read its port file at once: the
file came ~0.6 s later, so `cat` failed and bastion could not connect. The block is
taken from README.md itself, so the test follows what the README says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def demo_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    intro = readme.index("To try it with no key at all")
    found = re.search(r"```sh\n(.*?)```", readme[intro:], re.DOTALL)
    assert found is not None, "the README lost its no-key demo block"
    return found.group(1)


def test_the_readme_demo_block_works_pasted_into_a_fresh_shell(tmp_path):
    block = demo_block()
    assert ".venv/bin/bastion" in block
    # A clone with its .venv: this test's own environment.
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {k: os.environ[k] for k in ("PATH", "LANG", "TZ") if k in os.environ}
    env.update(
        HOME=str(tmp_path),
        BASTION_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    out = subprocess.run(
        ["bash", "--noprofile", "--norc", "-e"],
        input=block,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Hello from a scripted model.", (out.stdout, out.stderr)
