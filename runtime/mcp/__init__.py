"""MCP servers: the user's own tools, reached with the official SDK (`mcp`).

    [mcp_servers.NAME]   in the user's config (runtime.setup.load): a stdio server
                         (command, args, env) or a streamable HTTP one (url, headers)

What lives here, and what it may import:

- `config`  checks `[mcp_servers.NAME]` tables into `ServerSpec`s (no SDK import);
- `status`  `McpServerStatus`, the plain data `Harness.mcp_servers()` returns;
- `hub`     `McpHub`: one connection per server, started with the harness, their
            tools namespaced `NAME__tool`, calls and their results;
- `client`  one server's connection (the only module that imports `mcp`);
- `results` an MCP tool result as the model sees it (text, images, a spill);
- `toolbox` `McpToolbox`: the built-in tools plus every server's, one `Toolbox`;
- `extras`  the servers' prompts and resources, for the front ends;
- `oauth`   signing in to an HTTP server (`bastion mcp login NAME`), its stored tokens;
- `catalog` the deferred catalog: past `mcp_tool_search` tools (default 20), one search
            tool instead of every schema; what it loaded is read from committed calls.

The SDK is imported only when a server is configured: `bastion --version`, and
any session without a server, never load it (tests/mcp/test_lazy_import.py).
MCP calls take the built-in tools' durable path (runtime.run.calls): they ask by
default, are never replayed after a crash (MCP has no idempotency), and their
effects are recorded as outside bastion's reach.
"""

from __future__ import annotations

from runtime.mcp.config import SEPARATOR, ServerSpec, check_servers, server_specs
from runtime.model.results import McpServerStatus

__all__ = ["SEPARATOR", "McpServerStatus", "ServerSpec", "check_servers", "server_specs"]
