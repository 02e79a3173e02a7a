"""runtime.methodcache: dataclasses made with the cache behave as without it, the
second process compiles nothing, and a broken or unwritable file costs only time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Classes of every kind dataclasses writes methods for, and what each one does.
SCRIPT = r"""
import json, sys
from runtime.methodcache import install_method_cache
cache = install_method_cache() if sys.argv[1] == "cache" else None

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import ClassVar

@dataclass(frozen=True, slots=True)
class Event:
    kind: ClassVar[str] = "event"
    conversation_id: str
    version: int
    data: dict = field(default_factory=dict)

@dataclass(order=True)
class Ranked:
    rank: int
    name: str = "x"
    scale: InitVar[int] = 1
    def __post_init__(self, scale):
        self.rank *= scale

@dataclass(kw_only=True, eq=False)
class Options:
    verbose: bool = False
    items: list = field(default_factory=list)

out = {}
e = Event("c1", 3, {"a": 1})
out["repr"] = repr(e)
out["eq"] = [e == Event("c1", 3, {"a": 1}), e == Event("c1", 4)]
out["hash"] = hash(Event("c", 1, None)) == hash(Event("c", 1, None))
try:
    e.version = 5
    out["frozen"] = False
except dataclasses.FrozenInstanceError:
    out["frozen"] = True
out["replace"] = repr(dataclasses.replace(e, version=9))
out["fields"] = [f.name for f in dataclasses.fields(Event)]
out["order"] = sorted([Ranked(3), Ranked(1, scale=5), Ranked(2)]) == [Ranked(2), Ranked(3), Ranked(1, scale=5)]
out["post_init"] = Ranked(2, scale=3).rank
out["kw_only"] = repr(Options(verbose=True))
out["identity_eq"] = Options() == Options()
out["signature"] = str(__import__("inspect").signature(Ranked))
out["annotations"] = sorted(Event.__init__.__annotations__)
if cache is not None:
    out["compiled"] = len(cache.added)
    out["reused"] = cache.reused
print(json.dumps(out))
"""


def _run(tmp: Path, mode: str, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    base.update(env)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], env=base, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _cache_files(tmp: Path) -> list[Path]:
    return sorted((tmp / "pycache").rglob("dataclass-methods*.marshal"))


def _same(with_cache: dict, without: dict) -> None:
    trimmed = {k: v for k, v in with_cache.items() if k not in ("compiled", "reused")}
    assert trimmed == without


def test_classes_made_from_the_cache_behave_as_without_it(tmp_path: Path) -> None:
    without = _run(tmp_path, "plain")
    first = _run(tmp_path, "cache")
    assert first["compiled"] > 10 and first["reused"] == 0
    assert len(_cache_files(tmp_path)) == 1
    second = _run(tmp_path, "cache")
    assert second["compiled"] == 0 and second["reused"] >= first["compiled"]
    _same(first, without)
    _same(second, without)
    assert without["frozen"] is True and without["post_init"] == 6


@pytest.mark.parametrize("content", [b"", b"not marshal at all", b"\xe9\x00garbage" * 40])
def test_an_unreadable_file_is_compiled_again_and_replaced(tmp_path: Path, content: bytes) -> None:
    without = _run(tmp_path, "plain")
    _run(tmp_path, "cache")
    (path,) = _cache_files(tmp_path)
    path.write_bytes(content)
    again = _run(tmp_path, "cache")
    assert again["compiled"] > 10
    _same(again, without)
    assert _run(tmp_path, "cache")["compiled"] == 0  # the file was written whole again


def test_a_file_of_something_else_is_not_used(tmp_path: Path) -> None:
    import marshal

    _run(tmp_path, "cache")
    (path,) = _cache_files(tmp_path)
    path.write_bytes(marshal.dumps(["a", "list", 1]))
    assert _run(tmp_path, "cache")["compiled"] > 10
    path.write_bytes(marshal.dumps({"def f(): pass": "not code"}))
    assert _run(tmp_path, "cache")["compiled"] > 10
    # Every entry present but damaged: each is compiled again, and the file mended.
    from runtime.methodcache import MethodCache

    kept = MethodCache(str(path)).codes
    assert kept
    path.write_bytes(marshal.dumps({source: b"\xe3garbage" for source in kept}))
    without = _run(tmp_path, "plain")
    damaged = _run(tmp_path, "cache")
    assert damaged["compiled"] > 10 and damaged["reused"] == 0
    _same(damaged, without)


def test_nothing_is_written_when_bytecode_is_not(tmp_path: Path) -> None:
    result = _run(tmp_path, "cache", PYTHONDONTWRITEBYTECODE="1")
    assert result["compiled"] > 10
    assert _cache_files(tmp_path) == []


def test_an_unwritable_place_costs_only_time(tmp_path: Path) -> None:
    # (a file where the cache's folder would be: no folder can be made under it,
    # whoever runs this, root included)
    (tmp_path / "pycache").write_text("a file, not a folder")
    without = _run(tmp_path, "plain")
    _same(_run(tmp_path, "cache"), without)
    assert _run(tmp_path, "cache")["compiled"] > 10
    assert not list(tmp_path.glob("**/*.tmp"))
