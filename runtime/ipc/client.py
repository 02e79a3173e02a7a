"""The front ends' side of the protocol: `HarnessClient`, one typed method per op.

Every front end holds one: the app (over the socket pair to its harness process),
`bastion attach` (over a session's attach socket), `--plain` and print mode (over a
socket pair to the harness in their own process, served by `runtime.ipc.server` on
the same loop), `bastion acp`, and the tests. A method builds its op, sends it, and
returns the reply decoded to the op's `Reply` type; a refusal raises the typed error
it names (`runtime.model.protocol.decode_error`). Events arrive on the channel
`subscribe` returns, as the harness's own `EventChannel` gives them.

    client = await HarnessClient.connect(connection, client="app")
    channel = client.subscribe(conversation_id)   # before the snapshot: nothing missed
    view = await client.snapshot(conversation_id)
    item = await client.submit(conversation_id, "hi")
    await client.close()                          # the owner: closes the harness too

When the connection ends (the harness's process died), every waiting call fails with
`HarnessGone`, every channel closes, and `gone` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import subprocess
from collections.abc import Sequence
from typing import Any, Final, Self, TypeVar

from runtime.ipc.channel import DEFAULT_LIMIT, EventChannel
from runtime.ipc.wire import Connection
from runtime.model import protocol as p
from runtime.model.errors import (
    BastionError,
    HarnessGone,
    SessionFailedError,
    UnknownConversation,
)
from runtime.model.events import SessionFailed
from runtime.model.jobs import JobRecord
from runtime.model.protocol import VERSION, ProtocolError
from runtime.model.records import (
    Conversation,
    Entry,
    InboxItem,
    InboxMode,
    Run,
    SessionSettings,
    SessionSummary,
    ToolCallRecord,
)
from runtime.model.results import (
    AgentRecord,
    CloseReport,
    Interruption,
    McpPrompt,
    McpResource,
    McpServerStatus,
    Redirection,
    RestorePlan,
    RestoreReport,
    Rewound,
    SearchHit,
    Supersession,
    UsageSummary,
)
from runtime.model.rules import Rule
from runtime.model.views import ConversationView

__all__ = ["HarnessClient", "HarnessGone"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT: Final = 10.0  # seconds a harness process gets to close and exit
R = TypeVar("R")


async def hello(conn: Connection, client: str, token: str | None = None) -> dict[str, Any]:
    """Say hello over `conn`; the harness's hello (a refusal raises its error)."""
    message: dict[str, Any] = {"version": VERSION, "client": client}
    if token is not None:
        message["token"] = token
    try:
        await conn.send({"hello": message})
        answer = await conn.receive()
    except (ConnectionError, OSError):  # (its process went as we came: a stale socket)
        answer = None
    said = answer.get("hello") if isinstance(answer, dict) else None
    if not isinstance(said, dict):
        error = answer.get("error") if isinstance(answer, dict) else None
        await conn.close()
        if isinstance(error, dict):
            raise p.decode_error(error)
        raise HarnessGone("the harness closed the connection before its hello")
    return said


class HarnessClient:
    """A harness seen through one connection (see the module)."""

    def __init__(
        self,
        conn: Connection,
        *,
        owner: bool = False,
        process: subprocess.Popen[bytes] | None = None,
        limit: int = DEFAULT_LIMIT,
        elsewhere: bool = True,
    ) -> None:
        self.conn = conn
        #: The harness does not run on the caller's event loop (a front end's own CPU
        #: time is then its screen's: tui.pacing).
        self.elsewhere = elsewhere
        self.owner = owner
        self.process = process
        self.limit = limit
        self.gone: HarnessGone | None = None
        #: The storage error that ended the harness (its `SessionFailed` event, seen on
        #: any of this client's subscriptions): what a call meets once the connection
        #: ends, rather than `gone`.
        self.failed: SessionFailedError | None = None
        self.guest = False
        self.server_pid: int | None = None
        self._ids = itertools.count(1)
        self._subs = itertools.count(1)
        self._calls: dict[int, tuple[p.Op, asyncio.Future[Any]]] = {}
        self._channels: dict[int, EventChannel] = {}
        self._task: asyncio.Task[None] | None = None
        #: The task serving this client's other end, when it is in this process.
        self.serving: asyncio.Task[bool] | None = None

    @classmethod
    async def connect(
        cls,
        conn: Connection,
        *,
        client: str,
        token: str | None = None,
        owner: bool = False,
        process: subprocess.Popen[bytes] | None = None,
        elsewhere: bool = True,
    ) -> Self:
        """Say hello over `conn` and read the harness's; a refusal raises its error.
        `owner`: this client started the harness (its `close` closes it); `process`:
        the harness's process, reaped on `close`."""
        said = await hello(conn, client, token)
        self = cls(conn, owner=owner, process=process, elsewhere=elsewhere)
        #: On another process's attach socket (`bastion attach`): a guest of the session,
        #: whose leaving leaves its runs going; that process's MCP servers are its own.
        self.guest = token is not None
        self.server_pid = said.get("pid") if isinstance(said.get("pid"), int) else None
        self._task = asyncio.get_running_loop().create_task(self._read())
        return self

    # --- the connection ---------------------------------------------------------------

    async def call(self, op: p.Op) -> Any:
        """Send `op` and wait for its reply, decoded to its `Reply` type."""
        if self.gone is not None:
            raise self.failed or self.gone
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[request_id] = (op, future)
        try:
            await self.conn.send(p.encode_request(request_id, op))
        except (ConnectionError, OSError):
            self._calls.pop(request_id, None)
            gone = self._ended()
            raise (self.failed or gone) from None
        return await future

    async def _read(self) -> None:
        try:
            while True:
                try:
                    message = await self.conn.receive()
                except ProtocolError as exc:
                    log.warning("the harness sent a malformed message: %s", exc)
                    continue
                if message is None:
                    return
                self._dispatch(message)
        finally:
            self._ended()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "sub" in message:
            channel = self._channels.get(message["sub"])
            if channel is None:
                return
            if message.get("resync"):
                channel.overflow()
            elif message.get("ended"):
                self._channels.pop(message["sub"], None)
                channel.close()
            else:
                try:
                    events = [p.decode_event(e) for e in message.get("events") or ()]
                    channel.put_many(events)
                    self._note_failure(events)
                except (KeyError, TypeError, ValueError) as exc:
                    log.warning("a malformed event batch: %s", exc)
                    channel.overflow()  # the view reloads rather than miss an event
            return
        found = self._calls.pop(message.get("id"), None)  # type: ignore[arg-type]
        if found is None:
            return
        op, future = found
        if future.done():
            return
        if message.get("ok"):
            try:
                future.set_result(p.decode_result(op, message.get("result")))
            except ProtocolError as exc:
                future.set_exception(exc)
        else:
            error = message.get("error")
            future.set_exception(
                p.decode_error(error) if isinstance(error, dict) else ProtocolError("no error")
            )

    def _note_failure(self, events: Sequence[Any]) -> None:
        for event in events:
            if isinstance(event, SessionFailed) and self.failed is None:
                self.failed = SessionFailedError(
                    event.message, reason=event.reason, hint=event.hint or None
                )

    def _ended(self) -> HarnessGone:
        """The connection ended: fail what waits, close every channel."""
        if self.gone is None:
            code = self.process.poll() if self.process is not None else None
            self.gone = HarnessGone(
                "the harness process ended" + (f" (exit {code})" if code is not None else ""),
                hint="resume the session with `bastion -c`; `bastion doctor` checks the setup",
            )
        for _, future in self._calls.values():
            if not future.done():
                future.set_exception(self.failed or self.gone)
        self._calls.clear()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        return self.gone

    async def close(self) -> CloseReport | None:
        """Leave: the owner closes the harness first (leases released) and reaps its
        process; anyone else only disconnects (the session goes on). The owner gets
        the harness's `CloseReport` (None if it could not be had: the process was gone
        or did not answer in time)."""
        report: CloseReport | None = None
        if self.owner and self.gone is None:
            with contextlib.suppress(BastionError, TimeoutError):
                report = await asyncio.wait_for(self.call(p.Close()), CLOSE_TIMEOUT)
        await self.conn.close()
        if self.process is not None:
            await asyncio.to_thread(_reap, self.process)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.serving is not None:
            with contextlib.suppress(Exception):
                await self.serving
        return report

    # --- events ----------------------------------------------------------------------

    def subscribe(self, conversation_id: str, *, join: bool = True) -> EventChannel:
        """A channel of the conversation's events from now on; the request goes out
        before any later call's, so a snapshot asked for after this misses nothing.
        `join`: consecutive text deltas joined while they wait (False: each kept, in
        both processes' channels)."""
        sub = next(self._subs)
        channel = self._channels[sub] = EventChannel(self.limit, join=join)
        if self.gone is not None:
            channel.close()
            return channel
        request_id = next(self._ids)
        op = p.Subscribe(conversation=conversation_id, sub=sub, join=join)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_quiet)
        self._calls[request_id] = (op, future)
        self.conn.writer.write(p.line(p.encode_request(request_id, op)))
        return channel

    async def unsubscribe(self, channel: EventChannel) -> None:
        """End `channel`'s subscription: every event published before this call still
        arrives on it, then it closes."""
        for sub, mine in list(self._channels.items()):
            if mine is channel:
                if self.gone is None:
                    await self.call(p.Unsubscribe(sub=sub))
                else:
                    channel.close()
                return
        channel.close()

    # --- the ops ---------------------------------------------------------------------

    async def snapshot(self, conversation_id: str, last: int | None = None) -> ConversationView:
        view: ConversationView = await self.call(
            p.Snapshot(conversation=conversation_id, last=last)
        )
        return view

    async def submit(
        self,
        conversation_id: str,
        text: str,
        *,
        request_key: str | None = None,
        mode: InboxMode = InboxMode.PROMPT,
        create: Conversation | None = None,
        when_busy: str = "queue",
    ) -> InboxItem:
        op = p.Submit(
            conversation=conversation_id, text=text, mode=mode, request_key=request_key,
            create=create, when_busy=when_busy,
        )  # fmt: skip
        item: InboxItem = await self.call(op)
        return item

    async def write(self, conversation_id: str, text: str) -> Entry:
        """A user entry appended without asking the model (Busy while a run goes)."""
        entry: Entry = await self.call(p.Write(conversation=conversation_id, text=text))
        return entry

    async def withdraw(self, conversation_id: str, item_id: str) -> bool:
        return bool(await self.call(p.Withdraw(conversation=conversation_id, item=item_id)))

    async def send_held(self, conversation_id: str) -> tuple[InboxItem, ...]:
        return tuple(await self.call(p.SendHeld(conversation=conversation_id)))

    async def interrupt(self, conversation_id: str) -> Interruption:
        done: Interruption = await self.call(p.Interrupt(conversation=conversation_id))
        return done

    async def redirect(
        self, conversation_id: str, text: str, *, request_key: str | None = None
    ) -> Redirection:
        op = p.Redirect(conversation=conversation_id, text=text, request_key=request_key)
        done: Redirection = await self.call(op)
        return done

    async def supersede(
        self,
        conversation_id: str,
        text: str | None = None,
        *,
        request_key: str | None = None,
    ) -> Supersession:
        op = p.Supersede(conversation=conversation_id, text=text, request_key=request_key)
        done: Supersession = await self.call(op)
        return done

    async def reset(self, conversation_id: str, instructions: str | None = None) -> Entry:
        entry: Entry = await self.call(
            p.Reset(conversation=conversation_id, instructions=instructions)
        )
        return entry

    async def respond(
        self,
        conversation_id: str,
        tool_call_id: str,
        approve: bool,
        *,
        always: str | None = None,
        message: str | None = None,
        sandbox: str | None = None,
    ) -> tuple[Rule, ...]:
        op = p.Respond(
            conversation=conversation_id, tool_call=tool_call_id, approve=approve,
            always=always, message=message, sandbox=sandbox,
        )  # fmt: skip
        return tuple(await self.call(op))

    async def proposed_rules(
        self, conversation_id: str, tool_call_id: str, scope: str = "session"
    ) -> tuple[Rule, ...]:
        op = p.ProposedRules(conversation=conversation_id, tool_call=tool_call_id, scope=scope)
        return tuple(await self.call(op))

    async def rules(self, conversation_id: str) -> tuple[Rule, ...]:
        return tuple(await self.call(p.Rules(conversation=conversation_id)))

    async def compact(self, conversation_id: str, instructions: str | None = None) -> Entry | None:
        op = p.Compact(conversation=conversation_id, instructions=instructions)
        entry: Entry | None = await self.call(op)
        return entry

    async def cancel_compaction(self, conversation_id: str) -> bool:
        return bool(await self.call(p.CancelCompaction(conversation=conversation_id)))

    async def session_settings(self, conversation_id: str) -> SessionSettings:
        settings: SessionSettings = await self.call(p.Settings(conversation=conversation_id))
        return settings

    async def set_approval_mode(self, conversation_id: str, mode: str) -> SessionSettings:
        op = p.SetApprovalMode(conversation=conversation_id, mode=mode)
        settings: SessionSettings = await self.call(op)
        return settings

    async def set_model(self, conversation_id: str, spec: str) -> SessionSettings:
        settings: SessionSettings = await self.call(
            p.SetModel(conversation=conversation_id, spec=spec)
        )
        return settings

    async def set_reasoning_effort(self, conversation_id: str, effort: str) -> str:
        op = p.SetReasoningEffort(conversation=conversation_id, effort=effort)
        return str(await self.call(op))

    async def set_defaults(
        self, conversation_id: str, *, model: str | None = None, approval_mode: str | None = None
    ) -> None:
        op = p.SetDefaults(conversation=conversation_id, model=model, approval_mode=approval_mode)
        await self.call(op)

    async def new_session(self, conversation_id: str) -> Conversation:
        conv: Conversation = await self.call(p.NewSession(conversation=conversation_id))
        return conv

    async def switch_session(self, conversation_id: str, to: str) -> Conversation:
        conv: Conversation = await self.call(p.SwitchSession(conversation=conversation_id, to=to))
        return conv

    async def fork(self, conversation_id: str, at_entry: str | None = None) -> Conversation:
        conv: Conversation = await self.call(
            p.Fork(conversation=conversation_id, at_entry=at_entry)
        )
        return conv

    async def rewind(self, conversation_id: str, entry_id: str) -> Rewound:
        done: Rewound = await self.call(p.Rewind(conversation=conversation_id, entry=entry_id))
        return done

    async def restore_plan(self, conversation_id: str, entry_id: str) -> RestorePlan:
        op = p.PlanRestore(conversation=conversation_id, entry=entry_id)
        plan: RestorePlan = await self.call(op)
        return plan

    async def restore(self, plan: RestorePlan) -> RestoreReport:
        report: RestoreReport = await self.call(p.Restore(plan=plan))
        return report

    async def export(self, conversation_id: str) -> dict[str, Any]:
        return dict(await self.call(p.Export(conversation=conversation_id)))

    async def usage(self, conversation_id: str) -> UsageSummary:
        summary: UsageSummary = await self.call(p.Usage(conversation=conversation_id))
        return summary

    async def mcp_servers(self, *, wait: bool = False) -> tuple[McpServerStatus, ...]:
        return tuple(await self.call(p.McpServers(wait=wait)))

    async def mcp_prompts(self) -> tuple[McpPrompt, ...]:
        return tuple(await self.call(p.McpPrompts()))

    async def mcp_resources(self) -> tuple[McpResource, ...]:
        return tuple(await self.call(p.McpResources()))

    async def mcp_prompt(self, server: str, name: str, arguments: dict[str, str]) -> str:
        text: str = await self.call(p.GetMcpPrompt(server=server, prompt=name, arguments=arguments))
        return text

    async def mcp_resource(self, server: str, uri: str) -> tuple[str, str]:
        text, note = await self.call(p.ReadMcpResource(server=server, uri=uri))
        return str(text), str(note)

    async def jobs(self, conversation_id: str) -> tuple[JobRecord, ...]:
        return tuple(await self.call(p.Jobs(conversation=conversation_id)))

    async def stop_job(
        self, conversation_id: str, job: str, *, why: str = "by the user"
    ) -> JobRecord:
        op = p.StopJob(conversation=conversation_id, job=job, why=why)
        stopped: JobRecord = await self.call(op)
        return stopped

    async def agents(self, conversation_id: str) -> tuple[AgentRecord, ...]:
        return tuple(await self.call(p.Agents(conversation=conversation_id)))

    async def stop_agent(self, conversation_id: str, agent: str) -> AgentRecord:
        stopped: AgentRecord = await self.call(
            p.StopAgent(conversation=conversation_id, agent=agent)
        )
        return stopped

    async def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        return list(await self.call(p.Search(query=query, limit=limit)))

    async def session_summaries(self, limit: int = 500) -> list[SessionSummary]:
        return list(await self.call(p.Sessions(limit=limit)))

    async def resolve_id(self, text: str) -> str:
        return str(await self.call(p.ResolveId(text=text)))

    async def short_ids(self, ids: Sequence[str]) -> dict[str, str]:
        return dict(await self.call(p.ShortIds(ids=tuple(ids))))

    async def wait(self, item_id: str, conversation_id: str) -> Run:
        run: Run = await self.call(p.WaitRun(conversation=conversation_id, item=item_id))
        return run

    async def wait_run(self, run_id: str, conversation_id: str) -> Run:
        run: Run = await self.call(p.WaitRun(conversation=conversation_id, run=run_id))
        return run

    async def wait_idle(self, conversation_id: str) -> Run | None:
        run: Run | None = await self.call(p.WaitIdle(conversation=conversation_id))
        return run

    async def get_conversation(self, conversation_id: str) -> Conversation:
        conv: Conversation = await self.call(p.GetConversation(conversation=conversation_id))
        return conv

    async def exists(self, conversation_id: str) -> bool:
        """Whether the conversation is stored (one is stored at its first prompt)."""
        try:
            await self.get_conversation(conversation_id)
        except UnknownConversation:
            return False
        return True

    async def answer(self, conversation_id: str, run_id: str) -> str:
        return str(await self.call(p.Answer(conversation=conversation_id, run=run_id)))

    async def run_calls(self, conversation_id: str, run_id: str) -> tuple[ToolCallRecord, ...]:
        return tuple(await self.call(p.RunCalls(conversation=conversation_id, run=run_id)))

    async def ping(self) -> None:
        await self.call(p.Ping())


def _quiet(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # (a subscribe's reply is not awaited: its error is not lost)


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for the harness process to exit; kill it after CLOSE_TIMEOUT (a wedged store)."""
    try:
        process.wait(CLOSE_TIMEOUT)
    except subprocess.TimeoutExpired:
        log.warning("the harness process did not exit in %.0f s: killed", CLOSE_TIMEOUT)
        process.kill()
        process.wait()
