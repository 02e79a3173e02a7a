"""The Harness's parking: the app's harness process stops when the session is idle and
hands the conversation's lease to the app's own process (tui.parking), which holds
it while no harness runs; the process the app starts again takes it back
(runtime.run.driver: PARKED). A mixin over `HarnessCore`; `Harness` is the public
face."""

from __future__ import annotations

from runtime.harness.agent_ops import AgentOps
from runtime.model.errors import NotIdle
from runtime.model.results import Parked


class ParkingOps(AgentOps):
    async def park(self, conversation_id: str, pid: int) -> Parked:
        """Stop driving `conversation_id`, the one conversation this process drives, and
        hand its lease to process `pid` of this host as a parked lease, when the session
        is idle: no run or queued input (an approval waits in a run), no background job
        or subagent, no client on its attach socket, no MCP server configured (they
        are this process's children: each wake would start them again, seconds where
        the harness takes a third of one). NotIdle otherwise, with nothing
        changed. The attach socket's token comes back, for the app to keep that path
        served while parked (runtime.ipc.door). A new conversation not stored yet
        parks with no lease to hand over (`_park_unstored`)."""
        self._check_open()
        if self.mcp is not None:  # (they would start again with it: seconds, not ms)
            raise NotIdle("MCP servers are configured", hint="it does not park with them")
        driver = self._drivers.get(conversation_id)
        if driver is None and not self._drivers and not await self.store.exists(conversation_id):
            return self._park_unstored(conversation_id, pid)
        if driver is None or len(self._drivers) != 1:
            raise NotIdle(f"this process does not drive {conversation_id} alone")
        serving = self.serving
        if serving is not None and serving.clients(conversation_id):
            raise NotIdle("a client is attached to the session", hint="it parks once it leaves")
        if any(agent.running for agent in await self.agents(conversation_id)):
            raise NotIdle("a subagent is working", hint="it parks once the subagent ends")
        lease = await driver.park(pid)  # (NotIdle: a job runs, or work came meanwhile)
        self._drivers.pop(conversation_id, None)
        settings = self._settings.pop(conversation_id, None)
        mode, model = (settings.approval_mode, settings.model) if settings else ("", "")
        if driver.config.toolbox is not None:
            driver.config.toolbox.close()
        token = serving.token(conversation_id) if serving is not None else None
        if serving is not None:  # (its path and token stay for the app to bind: no gap
            await serving.stop(conversation_id, keep=True)  # in which attach finds none)
        assert lease.owner is not None and lease.pid is not None
        return Parked(
            owner=lease.owner, pid=lease.pid, token=lease.token, attach_token=token,
            approval_mode=mode, model=model,
        )  # fmt: skip

    def _park_unstored(self, conversation_id: str, pid: int) -> Parked:
        """A new conversation, not stored yet (nothing sent): no lease to hand over and
        nothing to keep; the process started again prepares it anew with its id."""
        settings = self._settings.get(conversation_id)
        mode, model = (settings.approval_mode, settings.model) if settings else ("", "")
        return Parked(owner="", pid=pid, token=0, approval_mode=mode, model=model)
