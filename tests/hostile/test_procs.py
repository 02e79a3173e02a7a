"""Issue 34 items 3 and 9: a cloned repository's Python never runs inside bastion.

The corpus: a workspace holding packages named like bastion's own (`tools/`, `tui/`,
`runtime/`, `themes/`) and its dependencies' (`httpx.py`, `textual/`, `rich/`),
each of which appends its name to a marker file outside the workspace when
imported; a `PYTHONPATH=.` such as a project's `.envrc` sets; and bytecode shipped
under a relative `PYTHONPYCACHEPREFIX` (an unchecked-hash .pyc for a runtime module
and a method-cache file of the kind bastion used to load). Before the fix the app's
harness process and renderer (`python -m tui.child` with the workspace as working
directory) imported the repository's `tools/`; `bastion -p` under `PYTHONPATH=.`
imported its `httpx.py`; the relative cache prefix made the runtime load the
repository's bytecode.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import py_compile
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.testing.process import LoopbackThread
from tests.bench.terminal import Terminal

pytestmark = pytest.mark.e2e

BASTION = Path(sys.executable).parent / "bastion"
SHADOWS = ("tools", "tui", "runtime", "themes", "textual", "rich")  # packages
MODULES = ("httpx", "anyio", "tiktoken")  # single-file modules


def hostile_workspace(work: Path, marker: Path, skip: tuple[str, ...] = ()) -> None:
    """Plant a package or module under every name bastion imports early."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in (n for n in SHADOWS if n not in skip):
        (work / name).mkdir(parents=True)
        (work / name / "__init__.py").write_text(code)
    for name in MODULES:
        (work / f"{name}.py").write_text(code)


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "TZ") if k in os.environ}
    env.update(
        HOME=str(tmp_path / "userhome"),
        LANG="C.UTF-8",
        BASTION_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
    )
    return env


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    terminal = Terminal(tmp_path)
    try:
        yield terminal
    finally:
        terminal.kill()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_app_imports_nothing_from_the_workspace(tmp_path, term):
    """The app, its harness process and its renderer run, answer and draw in a clone
    full of bastion's and its dependencies' names (and under `PYTHONPATH=.`), and none
    of the clone's modules is imported (the issue's repro: `python -m tui.child` put the
    working directory first on the harness process's path)."""
    work, marker = tmp_path / "work", tmp_path / "imported.txt"
    hostile_workspace(work, marker)
    turns = [{"text": "**Answer** from the *model*: all good"}]
    with LoopbackThread.start(turns, tmp_path / "server") as server:
        env = base_env(tmp_path) | {"TERM": "xterm-256color", "OPENAI_BASE_URL": server.base_url}
        term.start([str(BASTION), "--model", "openai/test", "say hi"], env, work)
        term.wait_for(lambda s: "Answer from the model: all good" in s, "the drawn answer", 60)
    assert not marker.exists(), f"the clone's code ran inside bastion: {marker.read_text()}"


def test_print_mode_under_pythonpath_dot_imports_nothing_from_the_workspace(tmp_path):
    """`PYTHONPATH=.` (a project's .envrc): bastion drops it before it imports anything.
    Not `tui/`: the `bastion` script's own first import comes before any code of
    bastion's runs, as `pip`'s would under the same PYTHONPATH (README: trust)."""
    work, marker = tmp_path / "work", tmp_path / "imported.txt"
    hostile_workspace(work, marker, skip=("tui",))
    with LoopbackThread.start([{"text": "fine"}], tmp_path / "server") as server:
        env = base_env(tmp_path) | {
            "OPENAI_BASE_URL": server.base_url,
            "PYTHONPATH": f".{os.pathsep}{work}",
        }
        out = subprocess.run(
            [str(BASTION), "-p", "--model", "openai/test", "hi"],
            cwd=work, env=env, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "fine"
    assert not marker.exists(), f"the clone's code ran inside bastion: {marker.read_text()}"


def _dataclass_sources() -> list[str]:
    """The method sources `dataclasses` compiles when the runtime's records load, as an
    old bastion's method cache keyed them (gathered in a child interpreter)."""
    probe = (
        "import builtins, dataclasses, json, sys\n"
        "seen = []\n"
        "def record(source, *args):\n"
        "    seen.append(source)\n"
        "    return builtins.exec(source, *args)\n"
        "dataclasses.exec = record\n"
        # (the records and views are msgspec Structs now; tools' values are still
        # dataclasses, so the planted cache keys real sources)
        "import runtime.model.records, runtime.model.events, runtime.model.views\n"
        "import tools.sandbox, tools.read\n"
        "json.dump(seen, sys.stdout)\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    import json

    sources: list[str] = json.loads(out.stdout)
    assert sources, "no dataclass methods compiled: the planted cache would key nothing"
    return sources


def plant_bytecode(work: Path, prefix: str, marker: Path) -> None:
    """Under `work/prefix`, mirrored as Python mirrors a cache prefix: a method-cache
    file whose every code object writes `marker`, and an unchecked-hash .pyc of
    runtime/records.py that does the same."""
    spec = importlib.util.find_spec("runtime")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    mirror = work / prefix / str(package).lstrip(os.sep)
    mirror.mkdir(parents=True)
    hostile = compile(f"open({str(marker)!r}, 'a').write('method cache\\n')", "<x>", "exec")
    tag = sys.implementation.cache_tag
    codes = {source: marshal.dumps(hostile) for source in _dataclass_sources()}
    (mirror / f"dataclass-methods-2.{tag}.marshal").write_bytes(marshal.dumps(codes))
    evil = work / "evil_records.py"
    evil.write_text(f"open({str(marker)!r}, 'a').write('records pyc\\n')\n")
    py_compile.compile(
        str(evil),
        cfile=str(mirror / f"records.{tag}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def test_bytecode_a_repository_ships_under_a_relative_cache_prefix_is_not_loaded(tmp_path):
    work, marker = tmp_path / "work", tmp_path / "loaded.txt"
    work.mkdir()
    plant_bytecode(work, "pyc", marker)
    with LoopbackThread.start([{"text": "fine"}], tmp_path / "server") as server:
        env = base_env(tmp_path) | {
            "OPENAI_BASE_URL": server.base_url,
            "PYTHONPYCACHEPREFIX": "pyc",
        }
        out = subprocess.run(
            [str(BASTION), "-p", "--model", "openai/test", "hi"],
            cwd=work, env=env, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert not marker.exists(), f"bytecode from the repository ran: {marker.read_text()}"
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "fine"


def test_a_child_interpreters_environment_keeps_the_workspace_off_its_path(tmp_path):
    from runtime.ipc.pypath import child_environment, own_root

    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)
    outside = str(tmp_path / "elsewhere")
    os.environ.update(
        PYTHONPATH=os.pathsep.join([".", "src", str(work / "lib"), outside, own_root()]),
        PYTHONPYCACHEPREFIX="pyc",
    )
    try:
        child = child_environment(str(work))
    finally:
        os.environ.clear()
        os.environ.update(env)
    assert child["PYTHONPATH"].split(os.pathsep) == [outside, own_root()]
    assert "PYTHONPYCACHEPREFIX" not in child
