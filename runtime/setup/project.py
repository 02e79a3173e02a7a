"""What a project's `.bastion/config.toml` may change, even in a trusted folder.

The user's config and flags outrank the repository. A trusted project file may
choose the model and its reasoning effort, theme, instructions and token limits,
describe models, and point a *keyless* provider somewhere; it may only lower the
approval mode and the command sandbox, only lower the budgets (max_turns,
max_cost, time_limit, session_max_cost) and `mcp_tool_search`, only narrow `network_hosts` (the
hosts commands reach through bastion's proxy), and only add to the deny-list. It
never routes a user's credentials: `api_key_env` and `headers` are the user's
config's alone, and so is the `base_url` of any provider that sends a key (the
built-in `openai`, `openai-responses` and `anthropic`, and any provider the user's
file gives a key or headers). Everything else a project file sets is ignored, each
named in one note.

MCP servers (`[mcp_servers.NAME]`) are the user's config's alone, even in a
trusted folder: a stdio server is an arbitrary command run outside the command
sandbox, and an HTTP one is told whatever the model passes it, with the user's
headers. A project file that has them gets one note saying they were ignored.

What a hostile repository could do with a trusted project file: choose which
(keyless or user-keyed) model sees the conversation, make bastion ask more,
sandbox more, deny more. It could not send a key anywhere, run anything
unasked, or widen what commands may write.
"""

from __future__ import annotations

from typing import Any

from runtime.config.approvals import ApprovalMode
from runtime.run.budget import BUDGET_KEYS, lower_only

__all__ = ["KEYED_PROVIDERS", "restrict_project"]

#: Built-in providers that send a key from the environment by default.
KEYED_PROVIDERS = frozenset({"openai", "openai-responses", "anthropic"})
#: Top-level keys a trusted project file may set as they are.
_FREE = frozenset(
    {
        "model", "theme", "instructions", "compact_model", "max_output_tokens",
        "compact_reserve_tokens", "stream_idle_timeout", "models", "reasoning_effort",
    }
)  # fmt: skip
_PROVIDER_FREE = frozenset({"stream_idle_timeout", "max_output_tokens"})
_APPROVAL_ORDER = [m.value for m in ApprovalMode]  # read-only < ask < auto-edit < full-auto
_SANDBOX_ORDER = ["read-only", "workspace-write", "danger-full-access"]


def _keyed(name: str, user_providers: dict[str, Any]) -> bool:
    table = user_providers.get(name, {})
    return name in KEYED_PROVIDERS or bool(table.get("api_key_env")) or bool(table.get("headers"))


def restrict_project(
    project: dict[str, Any], user: dict[str, Any], default_mode: str
) -> tuple[dict[str, Any], list[str]]:
    """`project` (a checked config file's data) cut to what it may change over `user`:
    the kept data and one phrase per setting ignored, saying why."""
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in project.items():
        if key in _FREE:
            kept[key] = value
        elif key == "approval_mode":
            mine = str(user.get("approval_mode", default_mode))
            if _APPROVAL_ORDER.index(value) <= _APPROVAL_ORDER.index(mine):
                kept[key] = value
            else:
                ignored.append(f"approval_mode {value!r} (above yours, {mine!r})")
        elif key == "sandbox_mode":
            mine = str(user.get("sandbox_mode", "workspace-write"))
            if value != "danger-full-access" and _lower_or_same(value, mine):
                kept[key] = value
            else:
                ignored.append(f"sandbox_mode {value!r} (a project may only narrow the sandbox)")
        elif key in BUDGET_KEYS:
            if (refused := lower_only(key, value, user)) is None:
                kept[key] = value
            else:
                ignored.append(refused)
        elif key == "mcp_tool_search":  # lower: the search tool sooner, less context
            from runtime.mcp.config import lower_tool_search

            if (refused := lower_tool_search(value, user)) is None:
                kept[key] = value
            else:
                ignored.append(refused)
        elif key == "deny_paths":
            kept[key] = value  # merged by addition: a project never removes an entry
        elif key == "network_hosts":
            kept[key] = value  # merged by intersection: a project only narrows the list
        elif key == "mcp_servers":
            names = ", ".join(sorted(value)) if isinstance(value, dict) else ""
            ignored.append(
                f"mcp_servers{f' ({names})' if names else ''}: an MCP server is a command "
                "bastion runs, with its own keys; only your own config may add one"
            )
        elif key == "providers":
            tables, why = _providers(value, user.get("providers", {}))
            kept[key] = tables
            ignored.extend(why)
        elif key == "hooks":
            ignored.append("hooks (a trusted project's hooks go in .bastion/settings.toml)")
        else:
            ignored.append(f"{key} (only your own config may set it)")
    return kept, ignored


def _lower_or_same(value: str, mine: str) -> bool:
    order = _SANDBOX_ORDER
    return value in order and mine in order and order.index(value) <= order.index(mine)


def _providers(
    tables: dict[str, Any], user_providers: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for name, table in tables.items():
        out: dict[str, Any] = {}
        for key, value in table.items():
            where = f"providers.{name}.{key}"
            if key in _PROVIDER_FREE or (key == "base_url" and not _keyed(name, user_providers)):
                out[key] = value
            elif key == "base_url":
                ignored.append(f"{where} (that provider sends your key)")
            else:
                ignored.append(f"{where} (keys and headers come from your own config only)")
        if out:
            kept[name] = out
    return kept, ignored
