"""MCP servers' prompts as slash commands: `/mcp__SERVER__NAME args`, as Claude Code
names them. The prompt is fetched from its server (runtime.mcp.extras) and sent as
the user's message, as a command file's is. The words after the command fill the
prompt's arguments in the order the server gives them (quotes group words; the last
argument takes the rest); a missing required argument is one line naming it, and
nothing is sent. The commands known when the servers have started are offered in
completion and `/help` (`known`); any `/mcp__…` is looked up when it runs, so a
server that started late or added a prompt needs nothing refreshed.
"""

from __future__ import annotations

import shlex
from typing import Any

from runtime import BastionError, McpPrompt

__all__ = ["PREFIX", "arguments_of", "known", "remember", "run_prompt", "split_name"]

PREFIX = "mcp__"
_KNOWN: list[McpPrompt] = []


def known() -> tuple[McpPrompt, ...]:
    """The servers' prompts as last listed (`remember`)."""
    return tuple(_KNOWN)


def remember(prompts: tuple[McpPrompt, ...]) -> None:
    _KNOWN[:] = prompts


def split_name(name: str) -> tuple[str, str] | None:
    """("SERVER", "NAME") of `mcp__SERVER__NAME` (a server's name never holds `__`)."""
    if not name.startswith(PREFIX):
        return None
    server, sep, prompt = name[len(PREFIX) :].partition("__")
    return (server, prompt) if sep and server and prompt else None


def arguments_of(prompt: McpPrompt, typed: str) -> dict[str, str]:
    """The typed words as the prompt's arguments, in its order; the last takes the rest."""
    try:
        words = shlex.split(typed)
    except ValueError:  # an unclosed quote: the words as typed
        words = typed.split()
    out: dict[str, str] = {}
    for i, name in enumerate(prompt.arguments):
        last = i == len(prompt.arguments) - 1
        value = " ".join(words[i:]) if last else (words[i] if i < len(words) else "")
        if value:
            out[name] = value
    return out


async def run_prompt(host: Any, server: str, name: str, typed: str) -> None:
    """Fetch the prompt with the typed arguments and send it, or say why not."""
    harness = host.harness
    try:
        listed = await harness.mcp_prompts()
        remember(listed)
        found = next((p for p in listed if (p.server, p.name) == (server, name)), None)
        args = arguments_of(found, typed) if found is not None else {}
        text = await harness.mcp_prompt(server, name, args)
    except BastionError as exc:
        host.say(str(exc), error=True)
        return
    await host.send_prompt(text)
