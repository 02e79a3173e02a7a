"""runtime/ and tools/ are headless: importing any of their modules loads no UI toolkit,
and tools/ never imports runtime or tui."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UI = ("textual", "prompt_toolkit", "rich")


def modules(package: str) -> list[str]:
    path = ROOT / package
    found = [package]
    for info in pkgutil.walk_packages([str(path)], prefix=f"{package}."):
        found.append(info.name)
    return found


@pytest.mark.parametrize(
    "package,banned",
    [
        ("runtime", (*UI, "tui")),
        ("tools", (*UI, "tui", "runtime")),
    ],
)
def test_headless_packages_import_no_ui(package, banned):
    names = modules(package)
    assert len(names) > 1, f"no modules found in {package}"
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    if name.endswith('__main__'): continue\n"
        "    importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {banned!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{package} pulled in {out.stdout.strip()}"
