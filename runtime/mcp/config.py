"""`[mcp_servers.NAME]` tables: checked here, used by runtime.mcp.hub.

    [mcp_servers.github]                  # a stdio server: bastion starts the command
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN = "..." }        # added to a minimal inherited environment

    [mcp_servers.docs]                    # a streamable HTTP server
    url = "http://127.0.0.1:8000/mcp"
    headers = { Authorization = "Bearer ..." }

Either may set `startup_timeout` (seconds to connect and list tools; default 30)
and `tool_timeout` (seconds one call may take; default 600), and `enabled =
false` to keep a table without starting it, and `restart = false` so that a server
that fails after it was up is not started again (runtime.mcp.client). An HTTP
server may say `oauth = true`: `bastion mcp login NAME` signs in (runtime.mcp.oauth). Only the user's own config may hold
these tables (runtime.setup.project: a server is a command bastion runs).

A server's tools are offered as `NAME__tool`, so NAME is letters, digits and
dashes, with single underscores between them (never `__`), at most 32 long.

    mcp_tool_search = 20                  # top level: more MCP tools than this, and a
                                          # request offers a search tool instead of
                                          # their schemas (runtime.mcp.catalog); 0:
                                          # always; false: never. Default 20; a trusted
                                          # project file may only lower it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from runtime.model.errors import ConfigError

SEPARATOR = "__"
NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
MAX_NAME = 32
KEYS = frozenset(
    [
        "command",
        "args",
        "env",
        "url",
        "headers",
        "startup_timeout",
        "tool_timeout",
        "enabled",
        "restart",
        "oauth",
    ]
)
DEFAULT_STARTUP = 30.0
DEFAULT_TOOL_TIMEOUT = 600.0
DEFAULT_TOOL_SEARCH = 20
_TOOL_SEARCH_HINT = (
    "mcp_tool_search = 20  (more MCP tools than this are found through a search tool; "
    "0: always; false: every schema in every request)"
)
_EXAMPLE = '[mcp_servers.NAME] with command = "my-server" (stdio) or url = "http://…/mcp"'


class ServerSpec(msgspec.Struct, frozen=True):
    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    startup_timeout: float = DEFAULT_STARTUP
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT
    restart: bool = True  # started again, with backoff, when it fails after it was up
    oauth: bool = False  # an HTTP server signed in to with OAuth (runtime.mcp.oauth)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def target(self) -> str:
        """What it runs or reaches, for people (no env, no headers: they hold secrets)."""
        if self.command is not None:
            import shlex

            return shlex.join([self.command, *self.args])
        return str(self.url)


def _fail(path: Path, where: str, what: str, hint: str = _EXAMPLE) -> ConfigError:
    return ConfigError(f"{path}: {where}{what}", hint=hint)


def check_servers(path: Path, value: Any) -> None:
    """Refuse a malformed `mcp_servers` value, naming the file, the table and the key."""
    if not isinstance(value, dict):
        raise _fail(path, "", "mcp_servers must be a table of [mcp_servers.NAME] tables")
    for name, table in value.items():
        where = f"[mcp_servers.{name}] "
        if not NAME.fullmatch(name) or len(name) > MAX_NAME:
            raise _fail(
                path, "", f"mcp_servers.{name}: a server's name is letters, digits and dashes "
                "with single underscores between (its tools are named NAME__tool), at most 32",
                hint="for example [mcp_servers.github]",
            )  # fmt: skip
        if not isinstance(table, dict):
            raise _fail(path, "", f"mcp_servers.{name} must be a table")
        _check_table(path, where, table)


def _check_table(path: Path, where: str, table: dict[str, Any]) -> None:
    unknown = set(table) - KEYS
    if unknown:
        raise _fail(
            path, where, f"has an unknown setting {sorted(unknown)[0]!r}",
            hint=f"[mcp_servers.NAME] takes only {', '.join(sorted(KEYS))}",
        )  # fmt: skip
    if ("command" in table) == ("url" in table):
        raise _fail(path, where, "needs exactly one of command (stdio) or url (streamable HTTP)")
    for key in ("command", "url"):
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            raise _fail(path, where, f"{key} must be a non-empty string")
    if "url" in table and not str(table["url"]).startswith(("http://", "https://")):
        raise _fail(path, where, "url must start with http:// or https://")
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _fail(path, where, "args must be a list of strings", hint='args = ["--port", "0"]')
    if "args" in table and "url" in table:
        raise _fail(path, where, "args go with command, not url")
    for key, partner in (("env", "command"), ("headers", "url")):
        mapping = table.get(key, {})
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise _fail(path, where, f"{key} must be a table of strings",
                        hint=f'{key} = {{ NAME = "value" }}')  # fmt: skip
        if key in table and partner not in table:
            raise _fail(path, where, f"{key} goes with {partner}")
    for key in ("startup_timeout", "tool_timeout"):
        seconds = table.get(key, 1)
        if type(seconds) not in (int, float) or not math.isfinite(seconds) or seconds <= 0:
            raise _fail(path, where, f"{key} must be a number of seconds above 0",
                        hint=f"{key} = 30")  # fmt: skip
    if "oauth" in table and "url" not in table:
        raise _fail(path, where, "oauth goes with url (an HTTP server)")
    for key in ("enabled", "restart", "oauth"):
        if not isinstance(table.get(key, True), bool):
            raise _fail(path, where, f"{key} must be true or false", hint=f"{key} = false")


def server_specs(tables: Mapping[str, Mapping[str, Any]]) -> tuple[ServerSpec, ...]:
    """The enabled servers of checked tables, in the order the file gives them."""
    out = []
    for name, table in tables.items():
        if not table.get("enabled", True):
            continue
        out.append(
            ServerSpec(
                name,
                command=table.get("command"),
                args=tuple(table.get("args", ())),
                env=dict(table.get("env", {})),
                url=table.get("url"),
                headers=dict(table.get("headers", {})),
                startup_timeout=float(table.get("startup_timeout", DEFAULT_STARTUP)),
                tool_timeout=float(table.get("tool_timeout", DEFAULT_TOOL_TIMEOUT)),
                restart=bool(table.get("restart", True)),
                oauth=bool(table.get("oauth", False)),
            )
        )
    return tuple(out)


def check_tool_search(path: Path, value: Any) -> None:
    """Refuse an `mcp_tool_search` that is neither a count of tools nor true/false."""
    if isinstance(value, bool) or (type(value) is int and value >= 0):
        return
    shown = repr(value)[:60]
    raise ConfigError(
        f"{path}: mcp_tool_search must be a number of tools (0 or more) or false, not {shown}",
        hint=_TOOL_SEARCH_HINT,
    )


def tool_search_threshold(value: Any) -> int | None:
    """A checked `mcp_tool_search` as a count of tools (None: never defer)."""
    if value is False:
        return None
    if value is True:
        return DEFAULT_TOOL_SEARCH
    return int(value)


def lower_tool_search(value: Any, user: Mapping[str, Any]) -> str | None:
    """None when a project's `mcp_tool_search` may stand over the user's (it defers at
    least as soon), else the phrase saying why it is ignored."""
    mine = tool_search_threshold(user.get("mcp_tool_search", True))
    theirs = tool_search_threshold(value)
    if mine is None or (theirs is not None and theirs <= mine):
        return None
    return f"mcp_tool_search {str(value).lower()} (above yours: a project may only lower it)"
