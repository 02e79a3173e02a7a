"""`McpToolbox`: the built-in tools and every MCP server's, as one runtime `Toolbox`.

The model loop and the call path (runtime.run.loop, runtime.run.calls) see one toolbox:
an MCP tool (NAME__tool) is side-effecting and not replay-safe, so it asks by
default, is never re-run after a crash, and its effect record says that what it
changed is outside bastion's reach (a rewind's plan names it). Everything else
(previews, effects, paths, a command's output) is the inner toolbox's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.mcp.hub import McpHub
from runtime.model.llm import ToolSpec
from runtime.model.tools import OnStart, Toolbox, ToolboxLayer, ToolInfo, ToolOutcome, unknown_tool

MCP_TOOL = ToolInfo(read_only=False, replay_safe=False)


class McpToolbox(ToolboxLayer):
    """The MCP servers' tools beside `inner`'s."""

    def __init__(self, inner: Toolbox | None, hub: McpHub, artifacts_dir: Path) -> None:
        super().__init__(inner)
        self.hub = hub
        self.artifacts_dir = artifacts_dir

    def specs(self) -> tuple[ToolSpec, ...]:
        return (*(self.inner.specs() if self.inner else ()), *self.hub.specs())

    def info(self, name: str) -> ToolInfo | None:
        if self.hub.owner(name) is not None:
            return MCP_TOOL
        return self.inner.info(name) if self.inner else None

    async def ready(self) -> None:
        """Before a model request: every server has started or failed."""
        await self.hub.ready()

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        if self.hub.owner(name) is not None:
            return await self.hub.call(name, arguments, self.artifacts_dir)
        if self.inner is None:
            return unknown_tool(name, [s.name for s in self.hub.specs()])
        extra: dict[str, Any] = {"sandbox": sandbox} if sandbox else {}
        return await self.inner.run(name, arguments, on_output, on_start, **extra)

    def capture_effects(self, name: str, arguments: str) -> dict[str, Any]:
        found = self.hub.owner(name)
        if found is not None:
            return {"kind": "external", "why": f"a tool of MCP server {found[0]}: what it "
                    "changed is outside the workspace's record"}  # fmt: skip
        capture = getattr(self.inner, "capture_effects", None)
        if capture is None:
            return {"kind": "untracked", "command": name}
        result: dict[str, Any] = capture(name, arguments)
        return result
