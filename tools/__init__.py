"""Bastion's coding tools over a descriptor-pinned workspace.

Headless: imports neither ``runtime`` nor any terminal UI library. The runtime
adapts these tools, not the reverse:

    with Workspace.open(root) as ws:
        ctx = ToolContext(ws, artifacts_dir=path, authorize_path=hook)
        result = await run_tool("read_file", {"path": "src/app.py"}, ctx)
        result.ok, result.data, result.refusal, result.images, result.model_text()

``TOOLS`` maps each tool name to its ``ToolDef`` (description, JSON schema,
read_only, replay_safe, run). The tool modules load on first use of ``TOOLS``
or ``run_tool``, so ``python -m tools NAME ...`` imports only the tool it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.context import Access, AuthorizePath, ToolContext
from tools.limits import Limits
from tools.refusal import Refusal, RefusalCode
from tools.result import ImageBlock, ToolResult
from tools.tooldef import ToolDef
from tools.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from tools.registry import TOOLS, run_tool, run_tool_sync

__all__ = [
    "TOOLS",
    "Access",
    "AuthorizePath",
    "ImageBlock",
    "Limits",
    "Refusal",
    "RefusalCode",
    "ToolContext",
    "ToolDef",
    "ToolResult",
    "Workspace",
    "WorkspaceError",
    "run_tool",
    "run_tool_sync",
]


def __getattr__(name: str) -> Any:
    if name in ("TOOLS", "run_tool", "run_tool_sync"):
        from tools import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'tools' has no attribute {name!r}")
