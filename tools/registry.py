"""The tool table and the one entry point the runtime calls."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tools.context import ToolContext
from tools.refusal import RefusalCode
from tools.result import ToolResult
from tools.schema import check
from tools.tooldef import ToolDef, guarded

# Tool name -> the module that owns it, in the order the model is shown them.
MODULES: Mapping[str, str] = MappingProxyType(
    {
        "read_file": "tools.read",
        "write_file": "tools.write",
        "edit_file": "tools.edit",
        "list_directory": "tools.listing",
        "glob": "tools.glob",
        "search_files": "tools.search",
        "run_command": "tools.command",
        "read_output": "tools.output",
        "stop_job": "tools.stop_job",
    }
)


def load(name: str) -> ToolDef | None:
    """Import just the module that owns ``name`` (one-shot runs stay lean)."""
    module = MODULES.get(name)
    if module is None:
        return None
    tool = importlib.import_module(module).TOOL
    assert isinstance(tool, ToolDef) and tool.name == name
    return tool


class _Table(Mapping[str, ToolDef]):
    """``TOOLS``: every tool, in a stable order; modules load on first access."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolDef] | None = None

    def _all(self) -> dict[str, ToolDef]:
        if self._tools is None:
            loaded = {name: load(name) for name in MODULES}
            self._tools = {name: tool for name, tool in loaded.items() if tool is not None}
        return self._tools

    def __getitem__(self, name: str) -> ToolDef:
        return self._all()[name]

    def __iter__(self) -> Any:
        return iter(self._all())

    def __len__(self) -> int:
        return len(MODULES)

    def __repr__(self) -> str:
        return f"TOOLS({', '.join(MODULES)})"


TOOLS: Mapping[str, ToolDef] = _Table()


def check_call(name: str, args: Any, tool: ToolDef | None) -> ToolResult | None:
    """A refusal for an unknown tool or arguments outside the contract, else None."""
    if tool is None:
        return ToolResult.refused(
            name,
            RefusalCode.INVALID_ARGUMENT,
            f"unknown tool {name!r}",
            "use one of: " + ", ".join(MODULES),
        )
    problem = check(tool.parameters, args)
    if problem:
        return ToolResult.refused(
            name,
            RefusalCode.INVALID_ARGUMENT,
            problem,
            "fix the arguments to match the tool's schema",
        )
    return None


async def run_tool(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Validate and run one tool. Never raises, except asyncio.CancelledError (after
    any child process has been killed)."""
    tool = TOOLS.get(name)
    refused = check_call(name, args, tool)
    if refused is not None:
        return refused
    assert tool is not None
    try:
        return await tool.run(ctx, dict(args))
    except Exception as exc:  # a tool's own guard should have caught it; be sure
        return ToolResult.refused(
            name, RefusalCode.INTERNAL, f"{name} failed: {type(exc).__name__}", "retry once"
        )


def run_tool_sync(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Blocking variant for one-shot use: loads only the named tool's module and uses
    its blocking core when it has one."""
    tool = load(name)
    refused = check_call(name, args, tool)
    if refused is not None:
        return refused
    assert tool is not None
    if tool.run_sync is not None:
        return guarded(name, tool.run_sync, ctx, dict(args))
    import asyncio

    return asyncio.run(tool.run(ctx, dict(args)))
