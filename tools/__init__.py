"""Bastion's coding tools over a descriptor-pinned workspace.

Headless: imports neither ``runtime`` nor any terminal UI library. The runtime
adapts these tools (``TOOLS``, ``run_tool``), not the reverse.
"""

from __future__ import annotations

from tools.context import Access, AuthorizePath, ToolContext
from tools.limits import Limits
from tools.refusal import Refusal, RefusalCode
from tools.registry import TOOLS, run_tool, run_tool_sync
from tools.result import ImageBlock, ToolResult
from tools.tooldef import ToolDef
from tools.workspace import Workspace, WorkspaceError

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
