"""The Harness's background subagents, for the user: the session's agents (`/agents`,
print mode's end) and stopping one (runtime.agents.background has the model's tools).
A mixin over `HarnessCore`; `Harness` is the public face."""

from __future__ import annotations

from typing import cast

from runtime.agents.background import AgentHost, background_children, describe, pick
from runtime.harness.core import HarnessCore
from runtime.model.errors import UnknownAgent
from runtime.model.results import AgentRecord


class AgentOps(HarnessCore):
    async def agents(self, conversation_id: str) -> tuple[AgentRecord, ...]:
        """The session's background agents, oldest first: state, last words, spend."""
        links = await self.store.read(lambda db: background_children(db, conversation_id))
        host = cast(AgentHost, self)  # (the Harness this mixin is part of)
        return tuple([await describe(host, link) for link in links])

    async def stop_agent(self, conversation_id: str, agent: str) -> AgentRecord:
        """Stop background agent `agent` (its id or description): its run interrupted,
        its work kept; its record once stopped. One that has ended is left as it is
        (stopping it again changes nothing). UnknownAgent if the session has no such
        agent (another session's agents are not this one's)."""
        self._check_open()
        links = await self.store.read(lambda db: background_children(db, conversation_id))
        named = pick(links, agent)
        if len(named) != 1:
            why = "several agents have that description" if named else "no such agent"
            raise UnknownAgent(
                f"{why} in this session: {agent}",
                hint="/agents lists this session's agents and their ids",
            )
        host = cast(AgentHost, self)
        await host.interrupt(named[0].conversation.id)
        return await describe(host, named[0])
