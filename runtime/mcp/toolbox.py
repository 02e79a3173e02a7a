"""`McpToolbox`: the built-in tools and every MCP server's, as one runtime `Toolbox`.

The model loop and the call path (runtime.run.loop, runtime.run.calls) see one toolbox:
an MCP tool (NAME__tool) is side-effecting and not replay-safe, so it asks by
default, is never re-run after a crash, and its effect record says that what it
changed is outside bastion's reach (a rewind's plan names it). Everything else
(previews, effects, paths, a command's output) is the inner toolbox's.

Past `tool_search` listed MCP tools the catalog is deferred (runtime.mcp.catalog):
the model is offered `mcp_search_tools` and the tools this conversation loaded with
it, read from the store before each request (`ready`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from runtime.mcp.catalog import NOT_OFFERED, SEARCH_INFO, SEARCH_TOOL, not_offered, search
from runtime.mcp.catalog import search_spec as _search_spec
from runtime.mcp.hub import McpHub
from runtime.model.llm import ToolSpec
from runtime.model.tools import (
    CURRENT_CALL,
    OnStart,
    Toolbox,
    ToolboxLayer,
    ToolInfo,
    ToolOutcome,
    unknown_tool,
)

MCP_TOOL = ToolInfo(read_only=False, replay_safe=False)


class McpToolbox(ToolboxLayer):
    """The MCP servers' tools beside `inner`'s.

    `tool_search`: defer the catalog when the servers list more tools than this (None:
    never); `loaded`: reads the tools this conversation loaded (runtime.mcp.catalog's
    `loaded_tools` over the store)."""

    def __init__(
        self,
        inner: Toolbox | None,
        hub: McpHub,
        artifacts_dir: Path,
        *,
        tool_search: int | None = None,
        loaded: Callable[[], Awaitable[Sequence[str]]] | None = None,
    ) -> None:
        super().__init__(inner)
        self.hub = hub
        self.artifacts_dir = artifacts_dir
        self.tool_search = tool_search
        self._read_loaded = loaded
        self.loaded: tuple[str, ...] = ()  # as of the last `ready`, from the store

    def deferred(self, listed: Sequence[ToolSpec] | None = None) -> bool:
        """Whether the servers list more tools than `tool_search` allows in a request."""
        count = len(self.hub.specs() if listed is None else listed)
        return self.tool_search is not None and count > self.tool_search

    def specs(self) -> tuple[ToolSpec, ...]:
        inner = self.inner.specs() if self.inner else ()
        listed = self.hub.specs()
        if not self.deferred(listed):
            return (*inner, *listed)
        by_name = {spec.name: spec for spec in listed}
        loaded = (by_name[name] for name in self.loaded if name in by_name)
        return (*inner, _search_spec(listed, self.hub.status()), *loaded)

    def _offered(self, name: str) -> bool:
        """Deferred: loaded and listed now (a loaded tool of a server that is down is
        refused in one line, not asked about and then failed)."""
        listed = self.hub.specs()
        if not self.deferred(listed):
            return True
        return name in self.loaded and any(spec.name == name for spec in listed)

    def info(self, name: str) -> ToolInfo | None:
        if name == SEARCH_TOOL:
            return SEARCH_INFO
        if self.hub.owner(name) is not None:
            return MCP_TOOL if self._offered(name) else NOT_OFFERED
        return self.inner.info(name) if self.inner else None

    async def ready(self) -> None:
        """Before a model request: every server has started or failed, and the tools
        this conversation loaded are read from its committed searches."""
        await self.hub.ready()
        if self._read_loaded is not None:
            self.loaded = tuple(await self._read_loaded())

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        if name == SEARCH_TOOL:
            return search(arguments, self.hub.specs(), self.hub.status())
        if self.hub.owner(name) is not None:
            if self._refused_at_intent(name):
                return not_offered(name, self.hub.specs(), self.hub.status())
            return await self.hub.call(name, arguments, self.artifacts_dir)
        if self.inner is None:
            return unknown_tool(name, [s.name for s in self.specs()])
        extra: dict[str, Any] = {"sandbox": sandbox} if sandbox else {}
        return await self.inner.run(name, arguments, on_output, on_start, **extra)

    def _refused_at_intent(self, name: str) -> bool:
        """Whether the call's committed intent found `name` not offered: an MCP tool is
        recorded not replay-safe, a tool not offered replay-safe (`NOT_OFFERED`). The
        record decides, not what is loaded now: a call the user was never asked about
        must not run because a search of the same turn (or a resume) loaded it since."""
        call = CURRENT_CALL.get()
        if call is not None and call.name == name:
            return call.replay_safe
        return not self._offered(name)

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
