"""Every configured MCP server of one harness: started with it, closed with it.

    hub = McpHub(specs, home / "mcp")     # nothing imported, nothing started
    hub.start()                           # each server connects in its own task
    await hub.ready()                     # before a model request: started or failed
    hub.specs()                           # their tools, NAME__tool, schemas as given
    await hub.call("NAME__tool", args_json, artifacts_dir)  # a ToolOutcome, never raises
    hub.status()                          # McpServerStatus per server

A tool whose namespaced name a provider would refuse (over 64 characters, or
characters other than letters, digits, `_` and `-`) is left out, and the
server's status says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from runtime.mcp.config import SEPARATOR, ServerSpec
from runtime.mcp.results import outcome, refused
from runtime.model.llm import ToolSpec
from runtime.model.results import McpServerStatus, ServerState
from runtime.model.tools import ToolOutcome

log = logging.getLogger(__name__)
_WIRE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


async def probe_mcp_servers(
    tables: Mapping[str, Mapping[str, Any]], home: Path
) -> tuple[McpServerStatus, ...]:
    """Start each enabled server of `[mcp_servers]` tables, list its tools, stop it: each
    one's status (`bastion doctor`). A stdio server's stderr goes to `home/mcp/NAME.log`."""
    from runtime.mcp.config import server_specs

    specs = server_specs(tables)
    if not specs:
        return ()
    hub = McpHub(specs, home / "mcp", restart=False)  # (a probe: each server once)
    hub.start()
    try:
        await hub.ready()
        return hub.status()
    finally:
        await hub.close()


class McpHub:
    def __init__(self, specs: Sequence[ServerSpec], log_dir: Path, *, restart: bool = True) -> None:
        """`restart`: a server that fails after it was up is started again with backoff
        (runtime.mcp.client), unless its table says `restart = false`."""
        from runtime.mcp.client import Connection  # the SDK itself loads when one connects

        self.version = 0  # bumped whenever a server's tools or state change
        self._servers = {
            s.name: Connection(s, log_dir, self._changed, restart=restart) for s in specs
        }

    def _changed(self) -> None:
        self.version += 1

    def start(self) -> None:
        for conn in self._servers.values():
            conn.start()

    async def ready(self) -> None:
        """Until every server has started or failed (each bounded by its startup_timeout)."""
        await asyncio.gather(*(c.wait_started() for c in self._servers.values()))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._servers.values()))

    # --- tools -------------------------------------------------------------------------

    def specs(self) -> tuple[ToolSpec, ...]:
        out = []
        for name, conn in self._servers.items():
            for tool_name, tool in list(conn.tools.items()):
                full = f"{name}{SEPARATOR}{tool_name}"
                if not _WIRE_NAME.fullmatch(full):
                    continue
                schema = dict(tool.input_schema or _EMPTY_SCHEMA)
                schema.setdefault("type", "object")
                about = tool.description or tool.title or f"{tool_name} (MCP server {name})"
                out.append(ToolSpec(full, about, schema))
        return tuple(out)

    def connections(self) -> list[tuple[str, Any]]:
        """(name, Connection) of each configured server (runtime.mcp.extras reads them)."""
        return list(self._servers.items())

    def owner(self, name: str) -> tuple[str, str] | None:
        """(server, tool) when `name` is NAME__tool of a configured server (up or not)."""
        server, sep, tool = name.partition(SEPARATOR)
        return (server, tool) if sep and tool and server in self._servers else None

    def status(self) -> tuple[McpServerStatus, ...]:
        out = []
        for name, conn in self._servers.items():
            names = tuple(f"{name}{SEPARATOR}{t}" for t in conn.tools)
            offered = tuple(n for n in names if _WIRE_NAME.fullmatch(n))
            status = conn.status(offered)
            skipped = len(names) - len(offered)
            if skipped and status.state is ServerState.READY:
                note = f"{skipped} tool name(s) left out: providers take [A-Za-z0-9_-], 64 at most"
                status = msgspec.structs.replace(status, detail=note)
            out.append(status)
        return tuple(out)

    # --- calls ---------------------------------------------------------------------------

    async def call(self, name: str, arguments: str, artifacts_dir: Path) -> ToolOutcome:
        """Call `name` (NAME__tool) with its JSON arguments. A server that is down, a tool
        it does not list, a failure or a timeout each come back as a refusal the model can
        act on; only cancellation (an interrupt) propagates."""
        from runtime.mcp.client import ServerGone

        found = self.owner(name)
        if found is None:
            return refused(name, "INVALID_ARGUMENT", f"no MCP tool {name}", "use a listed tool")
        server, tool = found
        conn = self._servers[server]
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return refused(name, "INVALID_ARGUMENT", f"arguments are not JSON ({exc})",
                           "call it again with a JSON object matching its schema")  # fmt: skip
        if not isinstance(args, dict):
            return refused(name, "INVALID_ARGUMENT", "arguments must be a JSON object",
                           "call it again with a JSON object matching its schema")  # fmt: skip
        if conn.state is ServerState.READY and tool not in conn.tools:
            listed = ", ".join(f"{server}{SEPARATOR}{t}" for t in conn.tools) or "none"
            return refused(name, "NOT_FOUND", f"MCP server {server} lists no tool {tool!r}",
                           f"its tools now: {listed}")  # fmt: skip
        try:
            result = await conn.call(tool, args)
        except ServerGone as exc:
            return refused(name, "UNAVAILABLE", str(exc),
                           "go on without this tool, or tell the user it is unavailable")  # fmt: skip
        except Exception as exc:  # the server's protocol error: that call's, never the run's
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return refused(name, "TOOL_ERROR", f"{name} failed: {text[:500]}",
                           "check the arguments against its schema, or try another way")  # fmt: skip
        return await asyncio.to_thread(outcome, name, result, artifacts_dir)
