"""The `task` tool: a subagent as a durable child conversation.

The parent model calls `task {description, prompt, agent?}`. The call's intent is
committed like any call's (runtime.run.calls); running it then

1. finds or creates the child: one transaction creates the child conversation
   (linked to the parent and to this call, runtime.agents.children) together
   with its first input, admitted under the request key `task:<call key>`;
2. records the child on the call (`process`: {"child", "agent", "description"}),
   so every front end can show the child under the call;
3. drives the child in this process (its own driver, lease, toolbox and model),
   relaying one line per child tool call as this call's output, and
4. waits for the child's run to end: its answer is this call's result.

Every step is idempotent, so the tool is replay-safe: after a crash the parent's
run runs the call again, which finds the same child and the same admitted input,
and the child's driver resumes it like any conversation (its streamed partial kept
and closed as interrupted, its calls exactly once, runtime.run.driver). All the calls
of a round that start children start them before the first is waited for
(`prepare_calls`), so several children run at once.

A child's tools are its agent's (runtime.agents.definitions; read-only by default),
never `task` (no grandchildren), and run under the parent's approval mode as this
process holds it when the child is driven: its approvals are ordinary pending
calls of the child, answered through `Harness.respond` from any front end.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from runtime.agents.background import AGENT_TOOLS, BackgroundAgents, agent_specs
from runtime.agents.children import final_text, find_child, link_tx, subagent_of
from runtime.agents.definitions import AgentCatalog, AgentDefinition
from runtime.model.errors import BastionError, ConversationBusy
from runtime.model.events import Event, ToolCallUpdated
from runtime.model.llm import ToolSpec
from runtime.model.records import (
    Approval,
    Conversation,
    InboxItem,
    InboxMode,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
)
from runtime.model.tools import CURRENT_CALL, OnStart, Toolbox, ToolboxLayer, ToolInfo, ToolOutcome
from runtime.model.views import call_summary
from runtime.run.admission import AdmittedBefore, admit_first_tx, new_conversation

if TYPE_CHECKING:
    from runtime.run.driver import Driver
    from runtime.store.database import Store

__all__ = ["TASK_TOOL", "ChildHost", "ChildToolbox", "TaskToolbox", "equip"]

log = logging.getLogger(__name__)
TASK_TOOL = "task"
_OPEN = (ToolCallState.PENDING, ToolCallState.RUNNING)
_STARTS = (Approval.NOT_REQUIRED, Approval.APPROVED)


class EventFeed(Protocol):
    """A subscription to the harness's events (runtime.harness.core.Subscription)."""

    def __aiter__(self) -> AsyncIterator[Event]: ...

    def close(self) -> None: ...


class ChildHost(Protocol):
    """What the task tool needs of the Harness (runtime.harness)."""

    store: Store

    def _publish(self, event: Event) -> None: ...

    def driver(self, conversation_id: str) -> Driver | None: ...

    def resolve_model(self, spec: str) -> Any: ...

    async def drive(
        self,
        conversation_id: str,
        *,
        interactive: bool = True,
        on_refusal: Callable[[str, str], None] | None = None,
        approval_mode: str | None = None,
        model: str | None = None,
    ) -> Driver | None: ...

    async def wait(self, item_id: str, conversation_id: str, *, poll: float = 1.0) -> Run: ...

    async def wait_run(self, run_id: str, conversation_id: str, *, poll: float = 1.0) -> Run: ...

    async def usage(self, conversation_id: str) -> Any: ...

    async def release(self, conversation_id: str) -> None: ...

    async def interrupt(self, conversation_id: str) -> Any: ...

    def subscribe(self, conversation_id: str | None = None) -> EventFeed: ...


def equip(
    host: ChildHost, conversation: Conversation, toolbox: Toolbox | None, catalog: AgentCatalog
) -> Toolbox | None:
    """The toolbox a driver of `conversation` gets: a child's is cut to its agent's
    tools; a top-level conversation's gains `task`."""
    if toolbox is None:
        return None
    started_as = subagent_of(conversation)
    if started_as:
        tools = started_as.get("tools")
        allowed = (
            frozenset(t for t in tools if isinstance(t, str))
            if isinstance(tools, list)
            else frozenset()
        )
        return ChildToolbox(toolbox, allowed, str(started_as.get("agent", "subagent")))
    return TaskToolbox(toolbox, host, conversation, catalog)


class ChildToolbox(ToolboxLayer):
    """A child's tools: only those its agent was given; any other is refused."""

    inner: Toolbox  # (always one: a driver with no toolbox gets no layer)

    def __init__(self, inner: Toolbox, allowed: frozenset[str], agent: str) -> None:
        super().__init__(inner)
        self.allowed = allowed
        self.agent = agent

    def specs(self) -> tuple[ToolSpec, ...]:
        # Asked each time: the inner toolbox's tools change (MCP servers start, list anew).
        return tuple(s for s in self.inner.specs() if s.name in self.allowed)

    def info(self, name: str) -> ToolInfo | None:
        if name not in self.allowed:  # refused without asking anyone (see `run`)
            return ToolInfo(read_only=True, replay_safe=True)
        return self.inner.info(name)

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        if name not in self.allowed:
            given = ", ".join(sorted(self.allowed)) or "none"
            text = (
                f"REFUSED FORBIDDEN: this subagent ({self.agent}) was not given {name}; "
                f"its tools: {given}.\nhint: report what you would change instead; "
                "the main agent decides."
            )
            return ToolOutcome(False, text, {"refusal": {"code": "FORBIDDEN", "message": text}})
        extra: dict[str, Any] = {"sandbox": sandbox} if sandbox else {}
        return await self.inner.run(name, arguments, on_output, on_start, **extra)


class TaskToolbox(ToolboxLayer):
    """A top-level conversation's tools and `task`."""

    inner: Toolbox  # (always one: a driver with no toolbox gets no layer)

    def __init__(
        self, inner: Toolbox, host: ChildHost, parent: Conversation, catalog: AgentCatalog
    ) -> None:
        super().__init__(inner)
        self.host = host
        self.parent = parent
        self.catalog = catalog
        self._task = task_spec(catalog)
        self.agents = BackgroundAgents(host, parent.id, self._drive)

    def close(self) -> None:
        self.agents.close()
        super().close()

    def specs(self) -> tuple[ToolSpec, ...]:
        # Asked each time: the inner toolbox's tools change (MCP servers start, list anew).
        return (*self.inner.specs(), self._task, *agent_specs())

    def info(self, name: str) -> ToolInfo | None:
        if name in AGENT_TOOLS:
            # They act on this session's own children only (whose tools ask for
            # themselves); replay-safe: a message is admitted once under its call's key,
            # a stop or a wait done twice changes nothing more.
            return ToolInfo(read_only=True, replay_safe=True, concurrent=False)
        if name == TASK_TOOL:
            # Starting a child changes nothing; what the child does asks (or is refused)
            # under the parent's own mode. Replay-safe: a rerun finds the same child.
            # Not run alongside other calls (runtime.schedule): the children already run
            # side by side (`prepare_calls`), and their reports land in the asked order.
            return ToolInfo(read_only=True, replay_safe=True, concurrent=False)
        return self.inner.info(name)

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        if name != TASK_TOOL and name not in AGENT_TOOLS:
            extra: dict[str, Any] = {"sandbox": sandbox} if sandbox else {}
            return await self.inner.run(name, arguments, on_output, on_start, **extra)
        call = CURRENT_CALL.get()
        if call is None or call.name != name:
            return _refused("INTERNAL", f"{name} was run outside a recorded tool call")
        if name in AGENT_TOOLS:
            return await self.agents.run(name, call, arguments)
        request = await self._resolve(call, arguments)
        if isinstance(request, ToolOutcome):
            return request
        agent, description, prompt = request
        if _background(arguments):
            return await self._start_background(call, request, on_start)
        # Subscribed before the child starts, so none of its calls is missed however
        # soon it makes them (its id is known only once it exists: `_relay` filters).
        sub = self.host.subscribe() if on_output is not None else None
        try:
            child_id, item = await self._start(call, agent, description, prompt)
            if on_start is not None:
                record = {"child": child_id, "agent": agent.name, "description": description}
                pending = on_start(record)
                if inspect.isawaitable(pending):
                    await pending
        except BastionError as exc:
            if sub is not None:
                sub.close()
            return _refused("INTERNAL", f"the subagent could not start: {exc.message}")
        except BaseException:
            if sub is not None:
                sub.close()
            raise
        return await self._finish(child_id, item, agent, (sub, on_output))

    async def prepare_calls(self, calls: list[ToolCallRecord]) -> None:
        """Start the child of every task call of the round that will run, so they run
        side by side; each call then only waits for its own."""
        for call in calls:
            if call.name != TASK_TOOL or call.state not in _OPEN or call.approval not in _STARTS:
                continue
            request = await self._resolve(call, call.arguments)
            if isinstance(request, ToolOutcome):
                continue  # refused when the call runs
            try:
                await self._start(call, *request, background=_background(call.arguments))
            except BastionError as exc:  # the call itself starts it again and reports this
                log.info("subagent of call %s did not start ahead: %s", call.id, exc)

    # --- steps ------------------------------------------------------------------------

    async def _resolve(
        self, call: ToolCallRecord, arguments: str
    ) -> tuple[AgentDefinition, str, str] | ToolOutcome:
        """What the call asks for; a call that already started its child goes on with
        it as it was started, even if its agent's file is gone or changed since."""
        request = self._request(arguments)
        if not isinstance(request, ToolOutcome):
            return request
        child_id = await self.host.store.read(lambda db: find_child(db, call.id))
        if child_id is None:
            return request
        child = await self.host.store.get_conversation(child_id)
        started_as = subagent_of(child)
        name = str(started_as.get("agent") or "subagent")
        agent = AgentDefinition(name, "", child.agent.instructions, source="as started")
        return agent, child.title.partition(": ")[2] or name, ""

    def _request(self, arguments: str) -> tuple[AgentDefinition, str, str] | ToolOutcome:
        try:
            args = json.loads(arguments or "{}")
        except ValueError as exc:
            return _refused("INVALID_ARGUMENT", f"arguments are not JSON ({exc})")
        if not isinstance(args, dict):
            return _refused("INVALID_ARGUMENT", "arguments are not a JSON object")
        prompt, description = args.get("prompt"), args.get("description") or ""
        if not isinstance(prompt, str) or not prompt.strip():
            return _refused("INVALID_ARGUMENT", "prompt is missing: say what the subagent does")
        if not isinstance(description, str):
            return _refused("INVALID_ARGUMENT", "description must be a string")
        name = args.get("agent") or "general"
        agent = self.catalog.get(name) if isinstance(name, str) else None
        if agent is None:
            names = ", ".join(self.catalog.agents)
            return _refused("INVALID_ARGUMENT", f"there is no agent {name!r}; agents: {names}")
        return agent, " ".join(description.split())[:80] or agent.name, prompt

    async def _start_background(
        self,
        call: ToolCallRecord,
        request: tuple[AgentDefinition, str, str],
        on_start: OnStart | None,
    ) -> ToolOutcome:
        """Start the child and return its id at once; its driver goes on here."""
        agent, description, _ = request
        try:
            child_id, _item = await self._start(call, *request, background=True)
            self.agents.watch(child_id)
            if on_start is not None:
                record = {"child": child_id, "agent": agent.name, "description": description}
                pending = on_start(record | {"background": True})
                if inspect.isawaitable(pending):
                    await pending
        except BastionError as exc:
            return _refused("INTERNAL", f"the subagent could not start: {exc.message}")
        text = (
            f"started background agent {child_id} ({agent.name}: {description}). It works "
            "while you go on; wait_agents returns its answer, message_agent tells it more, "
            "stop_agent stops it."
        )
        data = {"child": child_id, "agent": agent.name, "background": True}
        return ToolOutcome(True, text, data)

    async def _start(
        self,
        call: ToolCallRecord,
        agent: AgentDefinition,
        description: str,
        prompt: str,
        *,
        background: bool = False,
    ) -> tuple[str, InboxItem]:
        """The child of `call` and its first input, created once; then driven here."""
        store = self.host.store
        key = f"task:{call.id}"
        child_id = await store.read(lambda db: find_child(db, call.id))
        if child_id is None:
            child = new_conversation(
                self.parent.cwd,
                settings=self._child_settings(call, agent, background),
                title=f"{agent.name}: {description}",
            )

            def first_input(tx: Any) -> InboxItem:
                link_tx(tx, self.parent.id, call.id)
                return admit_first_tx(tx, prompt, key, InboxMode.PROMPT)

            try:
                created, item = await store.create_conversation(
                    child, first_input, publish=self.host._publish
                )
            except AdmittedBefore as before:
                created, item = child.but(id=before.item.conversation_id), before.item
            assert item is not None
            child_id = created.id
        else:
            found = await store.admission(key)
            admitted = await store.inbox_item(found[1]) if found is not None else None
            if admitted is None:
                raise BastionError(f"subagent {child_id} has no admitted task")
            item = admitted
        await self._drive(child_id)
        return child_id, item

    def _child_settings(
        self, call: ToolCallRecord, agent: AgentDefinition, background: bool
    ) -> dict[str, Any]:
        model = agent.model or self.parent.agent.model
        if agent.model:
            try:
                self.host.resolve_model(agent.model)
            except BastionError:
                model = self.parent.agent.model  # a cheaper model that does not resolve here
        parent_driver = self.host.driver(self.parent.id)
        if parent_driver is not None and not agent.model:
            model = parent_driver.config.model_info.spec or model
        return {
            "model": model,
            "instructions": agent.prompt,
            "subagent": {
                "agent": agent.name,
                "tools": list(agent.tools),
                "parent": self.parent.id,
                "call": call.id,
                "source": agent.source,
                **({"background": True} if background else {}),
            },
        }

    async def _drive(self, child_id: str) -> None:
        """Drive the child here, as this process drives the parent (mode, asking)."""
        parent = self.host.driver(self.parent.id)
        config = parent.config if parent is not None else None
        with contextlib.suppress(ConversationBusy):  # driven elsewhere: read its end
            await self.host.drive(
                child_id,
                interactive=config.interactive if config else False,
                on_refusal=config.on_refusal if config else None,
                approval_mode=config.approval_mode.value if config else "read-only",
            )

    async def _end_with_parent(self, child_id: str) -> None:
        """The parent's run was cut. When by an interrupt (committed in the store; the
        parent's driver may see it before `Harness.interrupt` reaches the children), the
        child's run is interrupted here, while its driver still runs: releasing it below
        only stops the driver, which leaves the run to recovery, as at a process exit."""
        run = await self.host.store.latest_run(self.parent.id)
        if run is not None and run.interrupt_requested:
            await self.host.interrupt(child_id)

    async def _finish(
        self,
        child_id: str,
        item: InboxItem,
        agent: AgentDefinition,
        relaying: tuple[EventFeed | None, Callable[[str], None] | None],
    ) -> ToolOutcome:
        relay = asyncio.create_task(self._relay(child_id, *relaying))
        stopping = False  # cancelled (an interrupt): the relay stops at once
        try:
            run = await self.host.wait(item.id, child_id, poll=0.5)
            answer = await self.host.store.read(lambda db: final_text(db, run.id))
        except BastionError as exc:
            return _refused(
                "INTERNAL",
                f"the subagent {agent.name} stopped: {exc.message}",
                "its work so far is kept; try once more, or do the task yourself",
            )
        except asyncio.CancelledError:
            stopping = True
            await self._end_with_parent(child_id)
            raise
        finally:
            # Ended: what the subscription holds is relayed before it stops (cancelled
            # at once, it could drop the child's last calls; tests/agents/test_task.py).
            if relaying[0] is not None:
                relaying[0].close()
            if stopping:
                relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            # Done with it (or this process is stopping: it stays resumable). An idle
            # driver left behind would hold its lease and heartbeat for nothing.
            await self.host.release(child_id)
        data = {"child": child_id, "agent": agent.name, "state": run.state}
        if run.state == RunState.COMPLETED:
            return ToolOutcome(True, answer or "(the subagent answered with no text)", data)
        why = run.reason or run.state
        text = f"INTERRUPTED: the subagent {agent.name} ended {run.state} ({why})."
        if answer:
            text += f"\nits answer so far:\n{answer}"
        text += "\nhint: use what it found, or start it again with a narrower task."
        return ToolOutcome(False, text, data | {"refusal": {"code": "INTERRUPTED"}})

    async def _relay(
        self, child_id: str, sub: EventFeed | None, on_output: Callable[[str], None] | None
    ) -> None:
        """One line per tool call the child makes, as this call's live output: from
        `sub` (every event, subscribed before the child started) until it is closed."""
        if sub is None or on_output is None:
            return
        seen: set[str] = set()
        try:
            async for event in sub:
                if getattr(event, "conversation_id", None) != child_id:
                    continue
                if isinstance(event, ToolCallUpdated) and event.tool_call.id not in seen:
                    seen.add(event.tool_call.id)
                    call = event.tool_call
                    on_output(f"{call.name} {call_summary(call.name, call.arguments)}\n")
        finally:
            sub.close()


def task_spec(catalog: AgentCatalog) -> ToolSpec:
    kinds = "\n".join(f"- {a.name}: {a.description}" for a in catalog.agents.values())
    return ToolSpec(
        TASK_TOOL,
        "Delegate a self-contained task to a subagent: a fresh conversation with its own "
        "context and tools that works on it and returns one final report as this call's "
        "result. Use it for exploration and research that would fill your own context "
        "(find where something is defined, survey a module, gather facts). It cannot see "
        "this conversation: put everything it needs in `prompt`, and say what its report "
        "should contain. Several task calls in one turn run at the same time.\n"
        f"Agents:\n{kinds}",
        {
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A few words naming the task (shown to the user).",
                },
                "prompt": {"type": "string", "description": "The task, complete."},
                "agent": {
                    "type": "string",
                    "enum": list(catalog.agents),
                    "description": "Which agent does it (default: general).",
                },
                "background": {
                    "type": "boolean",
                    "description": "Run it in the background: this call returns its id at "
                    "once and you go on; get its answer with wait_agents.",
                },
            },
            "required": ["description", "prompt"],
        },
    )


def _background(arguments: str) -> bool:
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return False
    return isinstance(args, dict) and args.get("background") is True


def _refused(
    code: str, message: str, hint: str = "call task again with a complete prompt"
) -> ToolOutcome:
    text = f"REFUSED {code}: {message}.\nhint: {hint}."
    return ToolOutcome(False, text, {"refusal": {"code": code, "message": message}})
