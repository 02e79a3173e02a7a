"""Background subagents: started by `task {background: true}`, then listed, messaged,
waited for and stopped by the parent (issue 37 item 9; seeds 000 and 004).

A background child is the same durable child conversation as a foreground one
(runtime.agents.children: linked to the parent's call, its first input admitted
under `task:<call key>`); its settings say `"background": true`. The `task` call
returns its id at once and the child's driver goes on in this process.

- `list_agents`: the parent's background children: state, last words, spend.
- `message_agent {id, text}`: the text is admitted into the child's inbox as a
  steer under the request key `agent-message:<call key>`, in one transaction that
  first finds the key (a replayed call finds its own message: delivered once) and
  then requires a run still going (a child that ended is refused: nothing written).
- `wait_agents {ids, timeout}`: waits until each has ended or the timeout passes;
  its result carries each ended child's final answer. This is how a background
  child's answer reaches the parent: as the result of the wait (or of
  `list_agents`), committed once by the call machinery, so across a crash the
  answer is in the parent's record exactly once. The call is replay-safe: a wait
  cut by a crash waits again.
- `stop_agent {id}`: the interrupt, committed (runtime.run.calls.interrupt_tx);
  a child with no run going says so (stopped twice: one line, nothing changed).

When a child's run ends on its own (answered or failed; not stopped), the parent
is told without asking (`tell_parent`): a notice with the child's answer joins the
parent's running run as a steer, or, when the parent is idle in an interactive
session, starts a run of its own, so the model takes up the answer as Claude
Code's does. Admitted under the request key `agent-ended:<child run>` in one
transaction that first looks for it: told once, across a crash too. Not told when
the parent already has the answer (a wait_agents call for the child going on, or
one or a list_agents that returned after the child ended), nor in print mode when
the parent's run is over (-p stops its children and leaves nothing queued).

After a crash the parent's driver resumes its background children that have a
run not ended (`resume`): their drivers recover them like any conversation, so
their calls run exactly once. A child that ended untold (the crash came between)
is told before the parent's driver starts (`tell_ended`), when the parent has a
run to go on with; an idle parent is not started by opening the session. A child never gets these tools or `task` (the
depth limit: no grandchildren, runtime.agents.task.ChildToolbox).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from runtime.agents.children import ChildLink, children_of, final_text, subagent_of
from runtime.model.errors import BastionError
from runtime.model.llm import ToolSpec
from runtime.model.records import InboxItem, InboxMode, Run, RunState, ToolCallRecord
from runtime.model.results import AgentRecord
from runtime.model.tools import ToolOutcome
from runtime.run.admission import admit_tx, admitted_item
from runtime.store import failpoints
from runtime.store.dialect import dialect_of

if TYPE_CHECKING:
    from runtime.model.events import Event
    from runtime.model.results import Interruption
    from runtime.run.driver import Driver
    from runtime.store.database import Store
    from runtime.store.tx import Tx

__all__ = [
    "AGENT_TOOLS",
    "AgentEnded",
    "AgentHost",
    "BackgroundAgents",
    "agent_specs",
    "background_children",
    "describe",
    "pick",
]

log = logging.getLogger(__name__)

LIST, MESSAGE, WAIT, STOP = "list_agents", "message_agent", "wait_agents", "stop_agent"
AGENT_TOOLS = frozenset({LIST, MESSAGE, WAIT, STOP})
_WAIT_DEFAULT, _WAIT_MAX = 60.0, 1800.0
_LAST_WORDS = 2000
_TOLD_WORDS = 4000  # of a child's answer in the notice that tells the parent
ENDED_KEY = "agent-ended:"  # + the child's run id: the notice's request key


class AgentHost(Protocol):
    """What these tools need of the Harness (runtime.agents.task.AgentHost has it)."""

    store: Store

    def _publish(self, event: Event) -> None: ...

    def driver(self, conversation_id: str) -> Driver | None: ...

    async def interrupt(self, conversation_id: str) -> Interruption: ...

    async def wait_run(self, run_id: str, conversation_id: str, *, poll: float = 1.0) -> Run: ...

    async def usage(self, conversation_id: str) -> Any: ...

    async def release(self, conversation_id: str) -> None: ...


class AgentEnded(BastionError):
    """A message for a background agent whose run has ended: nothing was admitted."""

    code = "agent_ended"


def background_children(db: Any, parent_id: str) -> list[ChildLink]:
    """The parent's children started in the background, oldest first."""
    return [c for c in children_of(db, parent_id) if subagent_of(c.conversation).get("background")]


async def describe(host: AgentHost, link: ChildLink) -> AgentRecord:
    """What a background child is doing: its newest run's state, last words, spend."""
    child_id = link.conversation.id
    run = await host.store.latest_run(child_id)
    words = await host.store.read(lambda db: final_text(db, run.id)) if run else ""
    spend = (await host.usage(child_id)).total
    return AgentRecord(
        child_id,
        link.agent,
        _description(link),
        run.state if run is not None else "queued",
        words[-_LAST_WORDS:],
        spend.input_tokens,
        spend.output_tokens,
        spend.cost,
    )


def pick(links: list[ChildLink], agent_id: str) -> list[ChildLink]:
    """The agents `agent_id` names: by id, else by description (one or several)."""
    by_id = [link for link in links if link.conversation.id == agent_id]
    return by_id or [link for link in links if _description(link) == agent_id]


def message_tx(tx: Tx, text: str, key: str) -> InboxItem:
    """In one transaction: the message admitted before under `key` (a replay), else
    a steer into the child's running run; AgentEnded when no run is going."""
    found = admitted_item(tx, text, key, InboxMode.STEER)
    if found is not None:
        return found
    if tx.active_run() is None:
        raise AgentEnded("this agent has ended; its answer is final")
    return admit_tx(tx, text, key, InboxMode.STEER)


def ended_notice(link: ChildLink, run: Run, answer: str) -> str:
    """What the parent is told when its background child's run ended on its own."""
    child_id = link.conversation.id
    head = f"[background agent {child_id} ({link.agent}: {_description(link)})"
    if run.state == RunState.FAILED:
        reason = (run.error or {}).get("message") or run.reason or "no reason given"
        head += f" failed: {reason}]"
    else:
        head += " has finished. Its answer:]"
    if len(answer) > _TOLD_WORDS:
        answer = (
            answer[:_TOLD_WORDS] + f"\n[… {len(answer) - _TOLD_WORDS} more characters: wait_agents]"
        )
    return f"{head}\n{answer}".rstrip()


def notice_tx(tx: Tx, text: str, run: Run, link: ChildLink, start: bool) -> InboxItem | None:
    """In one transaction on the parent: the notice admitted under its key, as a steer
    into the parent's running run, or starting a run (`start`, when idle); None, and
    nothing written, when told before or the parent has the answer already."""
    key = ENDED_KEY + run.id
    if tx.rows("SELECT 1 FROM admissions WHERE request_key = ?", (key,)):
        return None
    named = (link.conversation.id, json.dumps(_description(link)))  # (by id or description)
    has = dialect_of(tx.db).contains
    has_it = tx.rows(
        "SELECT 1 FROM tool_calls WHERE conversation_id = ? AND ("
        f"(name = ? AND ({has('arguments', '?')} OR {has('arguments', '?')}) AND "
        "(state IN ('pending', 'running') OR updated_at >= ?)) OR "
        "(name = ? AND state = 'completed' AND updated_at >= ?)) LIMIT 1",
        (tx.conversation_id, WAIT, *named, run.updated_at, LIST, run.updated_at),
    )
    if has_it:
        return None
    active = tx.active_run() is not None
    if not active and not start:
        return None
    return admit_tx(tx, text, key, InboxMode.STEER if active else InboxMode.PROMPT)


class BackgroundAgents:
    """The four tools of a top-level conversation over its background children."""

    def __init__(
        self, host: AgentHost, parent_id: str, drive: Callable[[str], Awaitable[None]]
    ) -> None:
        self.host = host
        self.parent_id = parent_id
        self.drive = drive  # (drives a child here, as this process drives the parent)
        self._watches: dict[str, asyncio.Task[None]] = {}

    def watch(self, child_id: str) -> None:
        """Tell the parent when the child's run ends on its own (`tell_parent`)."""
        if child_id not in self._watches or self._watches[child_id].done():
            self._watches[child_id] = asyncio.ensure_future(self._tell_when_ended(child_id))

    def close(self) -> None:
        for task in self._watches.values():
            task.cancel()
        self._watches.clear()

    async def _tell_when_ended(self, child_id: str) -> None:
        try:
            run = await self.host.store.latest_run(child_id)
            if run is not None and not run.terminal:
                run = await self.host.wait_run(run.id, child_id, poll=0.5)
            mine = await self.host.store.read(lambda db: background_children(db, self.parent_id))
            link = next((c for c in mine if c.conversation.id == child_id), None)
            if run is not None and link is not None:
                await self.tell_parent(link, run)
        except BastionError as exc:  # (the store failing, the harness closing: said once)
            log.warning("the parent of background agent %s was not told: %s", child_id, exc)

    async def tell_ended(self) -> None:
        """Before the parent's driver starts (a resume): tell its unfinished run of the
        children that ended untold (a crash came between). An idle parent is not
        started by it: opening a session does not run the model on its own."""
        mine = await self.host.store.read(lambda db: background_children(db, self.parent_id))
        for link in mine:
            run = await self.host.store.latest_run(link.conversation.id)
            if run is not None and run.terminal:
                await self.tell_parent(link, run, start=False)

    async def tell_parent(self, link: ChildLink, run: Run, *, start: bool | None = None) -> None:
        """The child's run `run` ended: when on its own (answered or failed), the parent
        is told its answer (runtime.agents.background's docstring says how and when).
        `start`: whether an idle parent starts a run on it (by default, when this
        process drives the parent interactively)."""
        if run.state not in (RunState.COMPLETED, RunState.FAILED):
            return  # stopped (by the parent, the user, -p's end): whoever stopped it knows
        answer = await self.host.store.read(lambda db: final_text(db, run.id))
        text = ended_notice(link, run, answer)
        parent = self.host.driver(self.parent_id)
        if start is None:
            start = parent is not None and parent.config.interactive
        failpoints.hit("agent.told")  # (ended and committed, the parent not told yet)
        item = await self.host.store.transact(
            self.parent_id,
            lambda tx: notice_tx(tx, text, run, link, start),
            publish=self.host._publish,
        )
        if item is not None and parent is not None:
            parent.wake()

    async def run(self, name: str, call: ToolCallRecord, arguments: str) -> ToolOutcome:
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return _refused("INVALID_ARGUMENT", f"arguments are not JSON ({exc})")
        if not isinstance(args, dict):
            return _refused("INVALID_ARGUMENT", "arguments are not a JSON object")
        if name == LIST:
            return await self.listing()
        if name == WAIT:
            return await self.wait(args)
        child = await self._child(args.get("id"))
        if isinstance(child, ToolOutcome):
            return child
        if name == STOP:
            return await self.stop(child)
        return await self.message(child, args.get("text"), f"agent-message:{call.id}")

    async def _child(self, agent_id: Any) -> ChildLink | ToolOutcome:
        """This session's background agent named by its id, or by its description
        when no other agent of this session has the same one."""
        if not isinstance(agent_id, str) or not agent_id:
            return _refused("INVALID_ARGUMENT", "id is missing: give an id from list_agents")
        mine = await self.host.store.read(lambda db: background_children(db, self.parent_id))
        named = pick(mine, agent_id)
        if len(named) == 1:
            return named[0]
        if named:
            return _refused("AMBIGUOUS", f"{len(named)} agents are named {agent_id!r}")
        return _refused(
            "NOT_FOUND",
            f"{agent_id} is not a background agent of this session",
            "call list_agents for this session's agents and their ids",
        )

    async def resume(self) -> list[str]:
        """Drive every background child with a run not ended (after a crash, a resume),
        and tell the parent of those that ended untold."""
        mine = await self.host.store.read(lambda db: background_children(db, self.parent_id))
        resumed = []
        for link in mine:
            run = await self.host.store.latest_run(link.conversation.id)
            child_id = link.conversation.id
            if run is not None and not run.terminal and self.host.driver(child_id) is None:
                await self.drive(child_id)
                resumed.append(child_id)
            if run is not None and not run.terminal:
                self.watch(child_id)
        return resumed

    async def describe(self, link: ChildLink) -> dict[str, Any]:
        return msgspec.structs.asdict(await describe(self.host, link))

    async def listing(self) -> ToolOutcome:
        mine = await self.host.store.read(lambda db: background_children(db, self.parent_id))
        agents = [await self.describe(link) for link in mine]
        if not agents:
            return ToolOutcome(True, "no background agents in this session", {"agents": []})
        return ToolOutcome(True, json.dumps(agents, indent=1), {"agents": agents})

    async def message(self, child: ChildLink, text: Any, key: str) -> ToolOutcome:
        if not isinstance(text, str) or not text.strip():
            return _refused("INVALID_ARGUMENT", "text is missing: say what the agent should know")
        child_id = child.conversation.id
        try:
            item = await self.host.store.transact(
                child_id, lambda tx: message_tx(tx, text, key), publish=self.host._publish
            )
        except AgentEnded:
            run = await self.host.store.latest_run(child_id)
            state = run.state if run is not None else "ended"
            return _refused(
                "ENDED",
                f"agent {child_id} has ended ({state}); the message was not delivered",
                "read its answer with wait_agents, or start a new agent with task",
            )
        driver = self.host.driver(child_id)
        if driver is not None:
            driver.wake()
        return ToolOutcome(True, f"delivered to {child_id}", {"child": child_id, "item": item.id})

    async def stop(self, child: ChildLink) -> ToolOutcome:
        child_id = child.conversation.id
        interruption = await self.host.interrupt(child_id)
        if interruption.run_id is None:
            run = await self.host.store.latest_run(child_id)
            state = run.state if run is not None else "ended"
            return _refused(
                "ENDED",
                f"agent {child_id} was not running ({state}); nothing was stopped",
                "read its answer with wait_agents",
            )
        return ToolOutcome(
            True, f"stopped {child_id}; its work so far is kept", {"child": child_id}
        )

    async def wait(self, args: dict[str, Any]) -> ToolOutcome:
        ids = args.get("ids")
        if isinstance(ids, str):
            ids = [ids]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return _refused("INVALID_ARGUMENT", "ids is missing: give ids from list_agents")
        timeout = args.get("timeout", _WAIT_DEFAULT)
        if not isinstance(timeout, int | float) or timeout < 0:
            return _refused("INVALID_ARGUMENT", "timeout is a number of seconds, 0 or more")
        links: list[ChildLink] = []
        for agent_id in ids:
            found = await self._child(agent_id)
            if isinstance(found, ToolOutcome):
                return found
            links.append(found)
        await self.resume()  # (a child whose driver this process lost is driven again)
        ended = await self._wait_all([link.conversation.id for link in links], timeout)
        agents = [await self.describe(link) for link in links]
        for agent in agents:
            agent["ended"] = agent["id"] in ended
            if agent["ended"]:  # done: an idle driver would hold its lease for nothing
                await self.host.release(agent["id"])
        done = sum(1 for a in agents if a["ended"])
        head = f"{done} of {len(agents)} ended" + ("" if done == len(agents) else " (timed out)")
        return ToolOutcome(True, head + "\n" + json.dumps(agents, indent=1), {"agents": agents})

    async def _wait_all(self, child_ids: list[str], timeout: float) -> set[str]:
        runs: dict[str, Run] = {}
        for child_id in child_ids:
            run = await self.host.store.latest_run(child_id)
            if run is not None:
                runs[child_id] = run
        waits = {
            child_id: asyncio.ensure_future(self.host.wait_run(run.id, child_id, poll=0.5))
            for child_id, run in runs.items()
            if not run.terminal
        }
        try:
            if waits:
                await asyncio.wait(waits.values(), timeout=min(float(timeout), _WAIT_MAX))
        finally:
            for pending in waits.values():
                pending.cancel()
            for pending in waits.values():
                with contextlib.suppress(asyncio.CancelledError, BastionError):
                    await pending
        ended = set()
        for child_id in child_ids:
            run = await self.host.store.latest_run(child_id)
            if run is not None and run.terminal:
                ended.add(child_id)
        return ended


def _description(link: ChildLink) -> str:
    return link.conversation.title.partition(": ")[2]


def agent_specs() -> tuple[ToolSpec, ...]:
    agent_id = {
        "type": "string",
        "description": "The agent's id (from task or list_agents), or its description.",
    }
    return (
        ToolSpec(
            LIST,
            "List this session's background agents: id, state, last words, spend.",
            {"type": "object", "properties": {}},
        ),
        ToolSpec(
            MESSAGE,
            "Send a running background agent a message; it reads it after its current "
            "tool round. An agent that has ended cannot be messaged.",
            {
                "type": "object",
                "properties": {"id": agent_id, "text": {"type": "string"}},
                "required": ["id", "text"],
            },
        ),
        ToolSpec(
            WAIT,
            "Wait until the given background agents end (or the timeout passes); returns "
            "each one's state and final answer.",
            {
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}},
                    "timeout": {"type": "number", "description": "Seconds (default 60)."},
                },
                "required": ["ids"],
            },
        ),
        ToolSpec(
            STOP,
            "Stop a running background agent; what it did so far is kept.",
            {"type": "object", "properties": {"id": agent_id}, "required": ["id"]},
        ),
    )


def _refused(code: str, message: str, hint: str = "call list_agents for the ids") -> ToolOutcome:
    text = f"REFUSED {code}: {message}.\nhint: {hint}."
    return ToolOutcome(False, text, {"refusal": {"code": code, "message": message}})
