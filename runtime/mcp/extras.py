"""MCP beyond tools: the prompts and resources the servers offer, for the front ends.

    prompts(hub)                                 # McpPrompt per server prompt
    resources(hub)                               # McpResource per listed resource
    await prompt_text(hub, "docs", "review", {"file": "x.py"})   # the prompt as text
    await resource_text(hub, "docs", "file:///README.md")        # (text, note)

A prompt becomes the user's message (`/mcp__SERVER__NAME args`); a resource is
attached to a prompt by `@SERVER:URI`. What a server sends is untrusted input, as
a file of the workspace is: it goes to the model only as the user's message, is cut
at MAX_TEXT bytes (with a note), and a binary resource is not attached. Only a
resource the server *listed* can be read: a URI it did not list (`file:///../etc`,
another scheme, a typo) is refused without asking the server. Nothing here runs a
tool or needs an approval, and nothing is stored until the user sends the prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.model.errors import McpUnavailable
from runtime.model.results import McpPrompt, McpResource

if TYPE_CHECKING:
    from runtime.mcp.hub import McpHub

__all__ = ["MAX_TEXT", "prompt_text", "prompts", "resource_text", "resources"]

MAX_TEXT = 256 * 1024  # bytes of a prompt's or resource's text kept (as a mentioned file's)


def prompts(hub: McpHub) -> tuple[McpPrompt, ...]:
    out = []
    for server, conn in hub.connections():
        for name, prompt in list(conn.prompts.items()):
            args = tuple(prompt.arguments or ())
            out.append(
                McpPrompt(
                    server,
                    name,
                    _line(prompt.description or prompt.title or ""),
                    tuple(a.name for a in args),
                    tuple(a.name for a in args if a.required),
                )
            )
    return tuple(out)


def resources(hub: McpHub) -> tuple[McpResource, ...]:
    out = []
    for server, conn in hub.connections():
        for uri, item in list(conn.resources.items()):
            out.append(
                McpResource(
                    server,
                    str(uri),
                    _line(item.name or item.title or ""),
                    _line(item.description or ""),
                    item.mime_type or "",
                )
            )
    return tuple(out)


async def prompt_text(hub: McpHub, server: str, name: str, arguments: dict[str, str]) -> str:
    """The prompt's messages as one text (each message's text parts; a user turn's
    text as it is, others labelled). McpUnavailable with one line when it cannot."""
    conn = _connection(hub, server)
    found = next((p for p in prompts(hub) if p.server == server and p.name == name), None)
    if found is None:
        raise McpUnavailable(
            f"MCP server {server} offers no prompt {name!r}",
            hint="/mcp lists each server's prompts",
        )
    missing = [a for a in found.required if not arguments.get(a)]
    if missing:
        usage = " ".join(f"<{a}>" for a in found.arguments)
        raise McpUnavailable(
            f"/{found.command} needs {', '.join(missing)}",
            hint=f"/{found.command} {usage}",
        )
    result = await _asked(conn.get_prompt(name, arguments), server)
    parts = []
    for message in result.messages:
        text = _content_text(message.content)
        if text:
            parts.append(text if message.role == "user" else f"[{message.role}]\n{text}")
    text, _ = _capped("\n\n".join(parts))
    if not text.strip():
        raise McpUnavailable(f"the prompt {name!r} of MCP server {server} has no text")
    return text


async def resource_text(hub: McpHub, server: str, uri: str) -> tuple[str, str]:
    """A listed resource's text and a note (empty, or why it was cut). McpUnavailable
    with one line for an unlisted URI, a binary resource, or a server that fails."""
    conn = _connection(hub, server)
    if uri not in {str(u) for u in conn.resources}:
        raise McpUnavailable(
            f"MCP server {server} lists no resource {uri!r}",
            hint="only a resource the server lists can be attached: /mcp lists them",
        )
    result = await _asked(conn.read_resource(uri), server)
    texts = [c.text for c in result.contents if getattr(c, "text", None) is not None]
    if not texts:
        raise McpUnavailable(f"{server}:{uri} is not text (a binary resource is not attached)")
    return _capped("\n".join(texts))


def _connection(hub: McpHub, server: str) -> Any:
    conn = dict(hub.connections()).get(server)
    if conn is None:
        raise McpUnavailable(f"no MCP server {server!r} is configured", hint="/mcp lists them")
    return conn


async def _asked(request: Any, server: str) -> Any:
    from mcp import MCPError

    from runtime.mcp.client import ServerGone

    try:
        return await request
    except ServerGone as exc:
        raise McpUnavailable(str(exc)) from None
    except MCPError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise McpUnavailable(f"MCP server {server} refused: {first[:300]}") from None


def _content_text(content: Any) -> str:
    items = content if isinstance(content, list) else [content]
    texts = []
    for item in items:
        if getattr(item, "type", "") == "text":
            texts.append(item.text)
        elif getattr(item, "type", "") == "resource" and getattr(item.resource, "text", None):
            texts.append(item.resource.text)
    return "\n".join(texts)


def _capped(text: str) -> tuple[str, str]:
    data = text.encode("utf-8")
    if len(data) <= MAX_TEXT:
        return text, ""
    kept = data[:MAX_TEXT].decode("utf-8", "ignore")
    return kept, f"cut at {MAX_TEXT // 1024} KiB of {len(data) // 1024:,} KiB"


def _line(text: str) -> str:
    """A server's description on one line, bounded (it is shown in /help and /mcp)."""
    return " ".join(str(text).split())[:200]
