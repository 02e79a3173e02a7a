"""The interface the runtime uses: TOOLS, run_tool, results and their text."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import tools
from tools import TOOLS, Refusal, RefusalCode, ToolResult, run_tool

from .conftest import code

ROOT = Path(__file__).resolve().parents[2]
ORDER = [
    "read_file",
    "write_file",
    "edit_file",
    "list_directory",
    "glob",
    "search_files",
    "run_command",
    "read_output",
    "stop_job",
]


def test_tools_table_order_and_flags():
    assert list(TOOLS) == ORDER
    read_only = {name for name, tool in TOOLS.items() if tool.read_only}
    # (stop_job changes nothing in the workspace and ends only this session's own jobs)
    assert read_only == {
        "read_file", "list_directory", "glob", "search_files", "read_output", "stop_job"
    }  # fmt: skip
    for tool in TOOLS.values():
        assert tool.replay_safe == tool.read_only
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
        assert len(tool.description) > 40
        json.dumps(tool.schema())


def test_argument_names_are_the_contract():
    props = {name: set(tool.parameters["properties"]) for name, tool in TOOLS.items()}
    assert props == {
        "read_file": {"path", "offset", "limit"},
        "write_file": {"path", "content", "overwrite"},
        "edit_file": {"path", "old_text", "new_text", "replace_all", "expected_sha256"},
        "list_directory": {"path"},
        "glob": {"pattern", "path"},
        "search_files": {"pattern", "path", "literal", "include", "context", "max_results"},
        "run_command": {"command", "argv", "cwd", "timeout_ms", "background"},
        "read_output": {"id", "offset", "limit", "pattern", "literal", "wait"},
        "stop_job": {"id"},
    }


@pytest.mark.parametrize(
    "name,args,fragment",
    [
        ("no_such_tool", {}, "unknown tool"),
        ("read_file", {}, "missing required argument 'path'"),
        ("read_file", {"path": 3}, "'path' must be string"),
        ("read_file", {"path": "a", "offset": 0}, "at least 1"),
        ("read_file", {"path": "a", "offset": True}, "must be integer"),
        ("read_file", {"path": "a", "bogus": 1}, "unknown argument(s) bogus"),
        ("write_file", {"path": "a", "content": None}, "'content' must be string"),
        ("run_command", {"argv": []}, "at least 1"),
        ("run_command", {"argv": ["ls", 3]}, "every item"),
        ("search_files", {"pattern": "x", "context": 99}, "at most 20"),
    ],
)
async def test_run_tool_validates(ctx, name, args, fragment):
    result = await run_tool(name, args, ctx)
    assert code(result) == "INVALID_ARGUMENT"
    assert fragment in result.refusal.message


async def test_run_tool_rejects_non_object_args(ctx):
    result = await run_tool("read_file", ["path"], ctx)  # type: ignore[arg-type]
    assert code(result) == "INVALID_ARGUMENT"


async def test_host_errors_become_internal_and_name_nothing_outside(ctx, root, monkeypatch):
    import tools.read as read

    def boom(*a, **k):
        raise OSError(5, "Input/output error", str(root.parent / "secret-host-path"))

    monkeypatch.setattr(read, "load_text", boom)
    (root / "f.txt").write_text("x")
    result = await run_tool("read_file", {"path": "f.txt"}, ctx)
    assert code(result) == "INTERNAL"
    assert "secret-host-path" not in result.model_text() and str(root) not in result.model_text()


async def test_closed_workspace_refuses(ctx):
    ctx.workspace.close()
    result = await run_tool("list_directory", {}, ctx)
    assert code(result) == "INTERNAL"


def test_result_round_trip_and_text():
    result = ToolResult.refused(
        "read_file", RefusalCode.NOT_FOUND, "'a' does not exist", "check the spelling"
    )
    again = ToolResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert result.model_text() == "REFUSED NOT_FOUND: 'a' does not exist\nhint: check the spelling"
    assert Refusal.from_dict(result.refusal.to_dict()) == result.refusal
    assert {c.value for c in RefusalCode} == {
        "NOT_FOUND",
        "CONFLICT",
        "FORBIDDEN",
        "INVALID_ARGUMENT",
        "TOO_LARGE",
        "TIMEOUT",
        "CANCELLED",
        "SPILL_REFERENCE_UNKNOWN",
        "INTERNAL",
    }


async def test_results_are_json_round_trippable(call, root):
    (root / "a.txt").write_text("hello\n")
    for name, args in (
        ("read_file", {"path": "a.txt"}),
        ("list_directory", {}),
        ("glob", {"pattern": "*"}),
        ("search_files", {"pattern": "hell"}),
        ("run_command", {"command": "echo hi"}),
    ):
        result = await call(name, **args)
        again = ToolResult.from_dict(json.loads(json.dumps(result.to_dict())))
        assert again.model_text() == result.model_text()


def test_workspace_open_failure():
    with pytest.raises(tools.WorkspaceError):
        tools.Workspace.open("/definitely/not/here")


def _modules() -> list[str]:
    names = ["tools"]
    for info in pkgutil.iter_modules([str(ROOT / "tools")]):
        names.append(f"tools.{info.name}")
    return names


@pytest.mark.parametrize("module", _modules())
def test_each_module_is_headless(module):
    code_ = (
        f"import importlib, sys; importlib.import_module({module!r}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'prompt_toolkit', 'rich', 'runtime', 'tui')]; print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code_], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_cli_runs_a_tool_and_stays_lean(root):
    (root / "a.txt").write_text("needle\n")
    probe = (
        "import sys; from tools.__main__ import main;"
        "code = main(['search_files', '{\"pattern\": \"needle\"}']); sys.stdout.flush();"
        "heavy = ('asyncio', 'PIL', 'difflib', 'concurrent.futures', 'tools.command',"
        " 'dataclasses', 'orjson');"
        "sys.stderr.write(','.join(m for m in heavy if m in sys.modules)); sys.exit(code)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] and data["data"]["matches"][0]["path"] == "a.txt"
    assert out.stderr == "", f"heavy imports in a one-shot run: {out.stderr}"
    refused = subprocess.run(
        [sys.executable, "-m", "tools", "--text", "read_file", '{"path": "../x"}'],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"},
    )
    assert refused.returncode == 1 and refused.stdout.startswith("REFUSED INVALID_ARGUMENT")


def test_listing_every_tool_loads_neither_the_extension_nor_the_command_runner():
    """What a session pays to describe the tools to the model (bastion -p answering in
    words runs none): the definitions, not the native search, the supervisor or the
    sandbox, which load when a tool first walks, searches or runs a command."""
    probe = (
        "import sys; from tools import TOOLS; names = [t.name for t in TOOLS.values()];"
        "assert 'run_command' in names and 'search_files' in names, names;"
        "heavy = ('tools._native', 'tools.lifetime', 'tools.sandbox_run', 'tools.landlock');"
        "sys.stderr.write(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_cli_encodes_large_match_lists_with_orjson_and_odd_text_with_json():
    from tools.__main__ import ORJSON_FROM, encode

    small = {"ok": True, "data": {"files": ["a.py"] * (ORJSON_FROM + 5)}}
    assert json.loads(encode(small)) == small  # a list of strings: json
    hits = [{"path": "a.py", "line": i, "text": "é"} for i in range(ORJSON_FROM)]
    large = {"ok": True, "data": {"matches": hits}}
    out = encode(large)
    assert out.endswith(b"\n") and json.loads(out) == large
    odd = {"ok": True, "data": {"matches": [*hits, {"path": "bad\udcff", "line": 1, "text": ""}]}}
    assert json.loads(encode(odd))["data"]["matches"][-1]["path"] == "bad\udcff"


def test_the_native_module_is_in_use_or_its_absence_is_explained():
    """Where tools._native is missing this is the one line saying why (and it fails
    under BASTION_REQUIRE_NATIVE=1); where it is there, it loads."""
    from tools import native

    from .conftest import REQUIRED, WHY_NOT_NATIVE

    module, reason = native.load()
    if module is None and REQUIRED:
        pytest.fail(WHY_NOT_NATIVE + " [BASTION_REQUIRE_NATIVE=1]")
    if module is None:
        pytest.skip(WHY_NOT_NATIVE)
    assert reason == "built" and hasattr(module, "Reader")
