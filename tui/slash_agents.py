"""`/agents`: the session's background subagents (runtime.agents.background): id,
kind, description, state, spend and last words; `/agents stop ID` stops one (its
id, or its description). The app and `--plain` share it (tui.slash's COMMANDS)."""

from __future__ import annotations

from typing import Any, Protocol

from runtime import BastionError, HarnessClient
from tui.markup import escape

__all__ = ["agents"]


class Host(Protocol):
    """What /agents needs of its front end (tui.slash.CommandHost has it)."""

    @property
    def harness(self) -> HarnessClient | None: ...

    @property
    def conversation_id(self) -> str: ...

    def say(self, markup: str, *, error: bool = False) -> Any: ...


async def agents(host: Host, arg: str) -> None:
    words = arg.split(maxsplit=1)
    harness = host.harness
    if harness is None:
        host.say("the session is still opening: try /agents again in a moment", error=True)
        return
    try:
        if words and words[0] == "stop":
            if len(words) != 2:
                host.say("usage: /agents stop ID  (ID from /agents)", error=True)
                return
            agent = await harness.stop_agent(host.conversation_id, words[1].strip())
            host.say(f"{agent.id} {escape(agent.description)}: {escape(agent.state)}")
            return
        if words:
            host.say("usage: /agents, or /agents stop ID", error=True)
            return
        found = await harness.agents(host.conversation_id)
    except BastionError as exc:
        host.say(escape(str(exc)), error=True)
        return
    if not found:
        host.say("no background agents: the model starts one with task background: true")
        return
    lines = []
    for agent in found:
        tone = "$success" if agent.running else "$foreground-muted"
        cost = f" ${agent.cost:.4f}" if agent.cost is not None else ""
        spend = f"{agent.input_tokens}+{agent.output_tokens} tokens{cost}"
        lines.append(
            f"  [b]{agent.id}[/] {escape(agent.agent)}: [b]{escape(agent.description)}[/] "
            f"[{tone}]{escape(agent.state)}[/]  {spend}"
        )
        last = agent.last_words.strip().splitlines()[-1:] if agent.last_words.strip() else []
        if last:
            lines.append(f"      [$foreground-muted]{escape(last[0][:70])}[/]")
    running = sum(agent.running for agent in found)
    hint = "  [$foreground-muted](/agents stop ID stops one)[/]" if running else ""
    host.say(f"[b]background agents[/]{hint}\n" + "\n".join(lines))
