"""The deferred catalog: many MCP tools offered through one search tool.

Every MCP tool's schema in every request costs context (seven servers can take tens
of thousands of tokens before the user has said a word). When the servers list more
tools than `mcp_tool_search` (the user's config, default 20; a trusted project may
only lower it; `false`: never), a request carries the built-in tools, `SEARCH_TOOL`
and the MCP tools this conversation has *loaded*, instead of every schema:

    mcp_search_tools {"query": "create issue"}      # or an exact name: "gh__create_issue"

answers with the best matches (a keyword score over name and description, at most
`limit`, their input schemas while they fit `MAX_RESULT_BYTES`), and every tool it
answers with is loaded: offered, and callable by its name, from the next request on.

Durable without a state of its own: the loaded set is read from the conversation's
committed `mcp_search_tools` calls (their results name what they loaded:
`loaded_tools`) before each request, so a resume after a crash, a fork (which copies
the calls) and a compaction (which keeps them) all offer the same tools.

A call of an MCP tool that is not offered is refused at once, without asking the
user (its intent is recorded read-only and replay-safe: nothing runs): a listed tool
with SEARCH_REQUIRED, naming the search that loads it; a tool no server lists now (a
server down or gone since the search) with one line saying so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.mcp.results import refused
from runtime.model.llm import ToolSpec
from runtime.model.results import McpServerStatus, ServerState
from runtime.model.tools import ToolInfo, ToolOutcome

if TYPE_CHECKING:
    from runtime.store.dialect import Db


SEARCH_TOOL = "mcp_search_tools"  # no "__": no MCP tool (SERVER__tool) can take its name
SEARCH_INFO = ToolInfo(read_only=True, replay_safe=True)  # reads the servers' lists only
# An MCP tool not offered in the request the model answered: refused without asking
# (read-only: nothing runs) and refused again if a crash brings the call back.
NOT_OFFERED = ToolInfo(read_only=True, replay_safe=True)
MAX_QUERY_BYTES = 1_024
DEFAULT_RESULTS = 5
MAX_RESULTS = 10
MAX_RESULT_BYTES = 16_384  # schemas in one answer; a tool past it is named, loaded all the same
MAX_LISTED_NAMES = 1_500  # characters of tool names in the search tool's description
EXACT = 1_000  # the score of a tool the query names exactly

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_STOP = frozenset(
    {"a", "an", "and", "any", "by", "for", "from", "in", "into", "is", "it", "of", "on", "or",
     "the", "this", "that", "to", "tool", "tools", "with"}
)  # fmt: skip


# --- what the model is offered ---------------------------------------------------------


def search_spec(listed: Sequence[ToolSpec], statuses: Sequence[McpServerStatus]) -> ToolSpec:
    """The search tool, its description naming the servers and (capped) their tools."""
    counts = ", ".join(f"{s.name} {len(s.tools)}" for s in statuses if s.state is ServerState.READY)
    names = _capped(", ".join(s.name for s in listed), MAX_LISTED_NAMES, len(listed))
    description = (
        f"Find and load tools of the user's MCP servers. {len(listed)} MCP tools "
        f"({counts or 'none ready'}) are not offered until found, to save context. Search "
        "by what you need ('create issue', 'query database') or by exact name; each "
        "match comes back with its description and input schema and is loaded: call it "
        f"by its name from your next turn on. Not loaded yet unless found: {names}."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "keywords, or one or more exact tool names (SERVER__tool)",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS,
                "description": f"most matches to load (default {DEFAULT_RESULTS})",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    return ToolSpec(SEARCH_TOOL, description, parameters)


def _capped(text: str, limit: int, count: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(", ", 1)[0]
    return f"{cut}, … ({count - cut.count(', ') - 1} more)"


# --- ranking ---------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """Lower-case words of `text` (camelCase and snake_case split), a plural's `s` cut."""
    return [_stem(w) for w in _WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())]


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def score(query: str, spec: ToolSpec) -> int:
    """How well `spec` matches `query`: an exact name (namespaced, or the server's own)
    wins outright; otherwise each query word found among the name's words counts 6
    (3 as a prefix of one), among the description's 2 (1 as a prefix)."""
    own = spec.name.split("__", 1)[-1].lower()
    pieces = {p.lower() for p in re.split(r"[\s,]+", query) if p}
    if spec.name.lower() in pieces or own in pieces:
        return EXACT
    name, about = set(_words(spec.name)), set(_words(spec.description))
    total = 0
    for word in dict.fromkeys(_words(query)):
        if word in _STOP:
            continue
        if word in name:
            total += 6
        elif len(word) >= 3 and any(w.startswith(word) for w in name):
            total += 3
        if word in about:
            total += 2
        elif len(word) >= 3 and any(w.startswith(word) for w in about):
            total += 1
    return total


def rank(query: str, listed: Sequence[ToolSpec], limit: int) -> list[ToolSpec]:
    """The best `limit` matches of `query`, best first (ties in the servers' order); when
    the query names tools exactly, those alone (a name loads that tool, not its kin)."""
    scored = [(score(query, spec), i, spec) for i, spec in enumerate(listed)]
    best = sorted((t for t in scored if t[0] > 0), key=lambda t: (-t[0], t[1]))
    if best and best[0][0] >= EXACT:
        best = [t for t in best if t[0] >= EXACT]
    return [spec for _, _, spec in best][:limit]


# --- the search ------------------------------------------------------------------------


def search(
    arguments: str, listed: Sequence[ToolSpec], statuses: Sequence[McpServerStatus]
) -> ToolOutcome:
    """`mcp_search_tools` with its JSON arguments: the matches, loaded (`data["loaded"]`)."""
    servers = _servers_line(statuses)
    query, limit, problem = _arguments(arguments)
    if problem is not None:
        code, message, hint = problem
        return refused(SEARCH_TOOL, code, message, f"{hint}; {servers}")
    found = rank(query, listed, limit)
    down = _down(statuses)
    shown = query if len(query) <= 80 else query[:77] + "..."
    if not found:
        text = (
            f"No MCP tool matches {shown!r} ({len(listed)} searched).\n"
            f"hint: try other words or an exact name (SERVER__tool); {servers}"
        )
        return ToolOutcome(True, text + down, {"loaded": []})
    lines = [
        f"{len(found)} MCP tool{'s' if len(found) != 1 else ''} matching {shown!r}, now "
        "loaded: call them by name from your next turn on.",
    ]
    room = MAX_RESULT_BYTES
    for spec in found:
        schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"\n{spec.name}: {spec.description.strip()}")
        if len(schema.encode()) <= room:
            lines.append(f"input schema: {schema}")
            room -= len(schema.encode())
        else:
            lines.append(f"input schema: {len(schema.encode())} bytes, not repeated here; "
                         "it comes with the tool in your next turn")  # fmt: skip
    return ToolOutcome(True, "\n".join(lines) + down, {"loaded": [s.name for s in found]})


def _arguments(arguments: str) -> tuple[str, int, tuple[str, str, str] | None]:
    """(query, limit, None), or a refusal's (code, message, hint)."""
    how = 'call it as mcp_search_tools {"query": "create issue"}'
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return "", 0, ("INVALID_ARGUMENT", "the arguments are not JSON", how)
    if not isinstance(args, dict):
        return "", 0, ("INVALID_ARGUMENT", "the arguments must be a JSON object", how)
    query, limit = args.get("query", ""), args.get("limit", DEFAULT_RESULTS)
    if not isinstance(query, str):
        return "", 0, ("INVALID_ARGUMENT", "query must be a string", how)
    size = len(query.encode("utf-8", "surrogatepass"))
    if size > MAX_QUERY_BYTES:
        return "", 0, ("TOO_LARGE", f"the query is {size} bytes; at most {MAX_QUERY_BYTES}",
                       "search with a few keywords or exact tool names")  # fmt: skip
    if not query.strip():
        return "", 0, ("INVALID_ARGUMENT", "the query is empty",
                       "say what the tool should do ('create issue') or give its exact name")  # fmt: skip
    if type(limit) is not int:
        return "", 0, ("INVALID_ARGUMENT", "limit must be a whole number", how)
    return query.strip(), max(1, min(limit, MAX_RESULTS)), None


def _servers_line(statuses: Sequence[McpServerStatus]) -> str:
    parts = [
        f"{s.name} ({len(s.tools)} tools)" if s.state is ServerState.READY else f"{s.name} (down)"
        for s in statuses
    ]
    return "MCP servers: " + (", ".join(parts) or "none")


def _down(statuses: Sequence[McpServerStatus]) -> str:
    """One line per server whose tools cannot be searched now."""
    return "".join(
        f"\nnote: MCP server {s.name} is {s.state.value}"
        + (f" ({s.detail})" if s.detail else "")
        + ": its tools are not listed, so not searched."
        for s in statuses
        if s.state is not ServerState.READY
    )


# --- a call of a tool not offered ------------------------------------------------------


def not_offered(
    name: str, listed: Sequence[ToolSpec], statuses: Sequence[McpServerStatus]
) -> ToolOutcome:
    """Why `name` (SERVER__tool of a configured server) was not run: not loaded yet, or
    not listed now (its server is down, or no longer lists it)."""
    if any(spec.name == name for spec in listed):
        return refused(name, "SEARCH_REQUIRED", f"{name} is not loaded; search for it first",
                       f'{SEARCH_TOOL} {{"query": "{name}"}} loads it; call it after that')  # fmt: skip
    server = name.split("__", 1)[0]
    status = next((s for s in statuses if s.name == server), None)
    if status is None or status.state is not ServerState.READY:
        why = f" ({status.detail})" if status is not None and status.detail else ""
        state = status.state.value if status is not None else "gone"
        return refused(name, "UNAVAILABLE", f"MCP server {server} is {state}{why}: {name} "
                       "cannot be called now", "go on without it, or tell the user")  # fmt: skip
    return refused(name, "NOT_FOUND", f"MCP server {server} no longer lists {name}",
                   f"search again: {SEARCH_TOOL} finds what it lists now")  # fmt: skip


# --- the loaded set, from the store ----------------------------------------------------

_LOADED = (
    "SELECT result FROM tool_calls WHERE conversation_id = ? AND name = ? AND state = 'done' "
    'ORDER BY created_at, "index"'
)


def loaded_tools(db: Db, conversation_id: str) -> tuple[str, ...]:
    """The MCP tools the conversation's committed searches loaded, in the order they were
    first loaded (a search that was refused, interrupted or never finished loads none)."""
    out: dict[str, None] = {}
    for (raw,) in db.execute(_LOADED, (conversation_id, SEARCH_TOOL)):
        result: Any = json.loads(raw) if raw else None
        names = result.get("loaded") if isinstance(result, dict) and result.get("ok") else None
        if isinstance(names, list):
            out.update((n, None) for n in names if isinstance(n, str))
    return tuple(out)
