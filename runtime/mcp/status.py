"""What `Harness.mcp_servers()` says about each configured server: plain frozen data
that crosses to the app's process (pickled) and renders as a line or two."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ServerState(StrEnum):
    STARTING = "starting"  # connecting, or listing its tools
    READY = "ready"  # its tools are offered to the model
    FAILED = "failed"  # did not start, timed out, or died: its tools are gone
    STOPPED = "stopped"  # closed with the session


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    name: str
    transport: str  # "stdio" or "http"
    target: str  # the command line or the URL (never env or headers)
    state: ServerState
    detail: str = ""  # one line: why it failed, or what it skipped
    tools: tuple[str, ...] = ()  # namespaced: NAME__tool

    def line(self) -> str:
        """`NAME (stdio: cmd args) ready, 3 tools` / `… failed: why`."""
        head = f"{self.name} ({self.transport}: {self.target}) {self.state.value}"
        if self.state is ServerState.READY:
            head += f", {len(self.tools)} tool{'s' if len(self.tools) != 1 else ''}"
        return head + (f": {self.detail}" if self.detail else "")
