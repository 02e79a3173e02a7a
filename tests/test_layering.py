"""runtime/ and tools/ are headless: importing any of their modules loads no UI toolkit,
and tools/ never imports runtime or tui. The rooms are layers and no import is circular:
import-linter checks pyproject's contracts (type-only imports included), and a test
shows the contracts fail when a lower room imports a higher one or two modules import
each other."""

from __future__ import annotations

import os
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


# The runtime's public API, all a front end may import: the package's exports
# (`runtime/__init__.py`: the protocol's client among them), the views and the
# records, events and errors they are made of. Everything else is the runtime's own.
PUBLIC = {
    "runtime",
    "runtime.model.views",
    "runtime.model.records",
    "runtime.model.events",
    "runtime.model.errors",
}


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every runtime import in `path`, TYPE_CHECKING ones included."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] == "runtime"]
    return found


def test_front_ends_import_only_the_public_api():
    bad = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for package in ("tui", "themes")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, name in runtime_imports(path)
        if name not in PUBLIC
    ]
    assert bad == [], "front ends import runtime internals:\n" + "\n".join(bad)


def test_the_public_api_check_sees_an_internal_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from runtime.store.database import Store\nimport runtime.run.loop\nfrom runtime import Harness\n"
    )
    assert [name for _, name in runtime_imports(sample) if name not in PUBLIC] == [
        "runtime.store.database",
        "runtime.run.loop",
    ]


def test_every_public_name_loads():
    code = "import runtime\nfor name in runtime.__all__: getattr(runtime, name)\nprint(len(runtime.__all__))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 50


def lint_imports(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter", reason="import-linter is in the test extra")
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--no-cache", str(cwd / "pyproject.toml")],
        cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, **env},
    )  # fmt: skip


def test_the_rooms_are_layers_and_no_import_is_circular():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


ROOMS = ("testing", "ipc", "harness", "agents", "setup", "run", "hooks", "context", "plan",
         "mcp", "schedule", "config", "store", "providers", "model")  # fmt: skip


def fake_project(tmp_path: Path, modules: dict[str, str]) -> Path:
    """The four packages with every room, empty but for `modules` (name: source), and
    this repository's import-linter contracts."""
    for package in ("runtime", "tools", "tui", "themes"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for room in ROOMS:
        (tmp_path / "runtime" / room).mkdir()
        (tmp_path / "runtime" / room / "__init__.py").write_text("")
    for name, source in modules.items():
        (tmp_path / (name.replace(".", "/") + ".py")).write_text(source)
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text[text.index("\n[tool.importlinter]\n") :])
    return tmp_path


@pytest.mark.parametrize(
    "modules,broken",
    [
        # a lower room importing a higher one, only for its types
        ({"runtime.model.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
          "    import runtime.harness.b\n", "runtime.harness.b": ""},
         "runtime.model is not allowed to import runtime.harness"),
        # two siblings of one layer
        ({"runtime.hooks.a": "import runtime.context.b\n", "runtime.context.b": ""},
         "runtime.hooks is not allowed to import runtime.context"),
        # the tools importing the runtime
        ({"tools.a": "import runtime.model.b\n", "runtime.model.b": ""},
         "tools is not allowed to import runtime"),
        # a circle inside a room
        ({"tui.a": "import tui.b\n", "tui.b": "import tui.a\n"}, "No cycles are allowed in tui"),
    ],
)  # fmt: skip
def test_the_contracts_fail_when_a_room_imports_upward_or_in_a_circle(tmp_path, modules, broken):
    project = fake_project(tmp_path, modules)
    out = lint_imports(project, PYTHONPATH=str(project))
    assert out.returncode == 1, out.stdout + out.stderr
    assert broken in out.stdout, out.stdout
