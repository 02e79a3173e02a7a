"""The tool table and the one entry point the runtime calls."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tools import command, edit, glob, listing, output, read, search, write
from tools.context import ToolContext
from tools.refusal import RefusalCode
from tools.result import ToolResult
from tools.schema import check
from tools.tooldef import ToolDef, guarded

TOOLS: Mapping[str, ToolDef] = MappingProxyType(
    {
        tool.name: tool
        for tool in (
            read.TOOL,
            write.TOOL,
            edit.TOOL,
            listing.TOOL,
            glob.TOOL,
            search.TOOL,
            command.TOOL,
            output.TOOL,
        )
    }
)


def check_call(name: str, args: Any) -> ToolResult | None:
    """A refusal for an unknown tool or arguments outside the contract, else None."""
    tool = TOOLS.get(name)
    if tool is None:
        return ToolResult.refused(
            name,
            RefusalCode.INVALID_ARGUMENT,
            f"unknown tool {name!r}",
            "use one of: " + ", ".join(TOOLS),
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
    refused = check_call(name, args)
    if refused is not None:
        return refused
    try:
        return await TOOLS[name].run(ctx, dict(args))
    except Exception as exc:  # a tool's own guard should have caught it; be sure
        return ToolResult.refused(
            name, RefusalCode.INTERNAL, f"{name} failed: {type(exc).__name__}", "retry once"
        )


def run_tool_sync(name: str, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Blocking variant for one-shot use; uses the tool's blocking core if it has one."""
    refused = check_call(name, args)
    if refused is not None:
        return refused
    tool = TOOLS[name]
    if tool.run_sync is not None:
        return guarded(name, tool.run_sync, ctx, dict(args))
    import asyncio

    return asyncio.run(tool.run(ctx, dict(args)))
