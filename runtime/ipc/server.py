"""The harness side of the protocol (runtime.model.protocol): one connection's ops
applied to a `Harness`, its replies and its subscriptions' events sent back.

    closed = await serve(harness, connection, owner=True)           # the app's pair
    await serve(harness, connection, authenticate=check_token)      # an attach socket

Each op is applied through the same `Harness` call a front end in this process would
make, so a state change is the store's compare-and-set: two clients answering one
approval, one wins and the other gets the typed error (`NotPending`) as its reply.
Requests run concurrently (a long `compact` does not hold up a `snapshot`); a
`subscribe` is taken before the next message is read. Each subscription's events
wait in its own bounded, coalescing `EventChannel`; a client that falls behind gets
`resync` in place of what it missed, never a slower harness.

A malformed message, an unknown op, a bad argument: one `ProtocolError` reply for
that request; the connection and the harness go on. A client that disconnects
mid-turn changes nothing committed. `close` is the owner's alone (the process that
started the harness for it); anyone else gets a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from runtime.harness import Harness
from runtime.ipc.channel import DEFAULT_LIMIT, RESYNC, EventChannel, pump
from runtime.ipc.wire import Connection
from runtime.model import protocol as p
from runtime.model.errors import BastionError
from runtime.model.protocol import VERSION, ProtocolError

__all__ = ["Authenticate", "apply", "serve", "serve_connection"]

log = logging.getLogger(__name__)

HELLO_TIMEOUT = 10.0  # seconds a client has to say hello
#: Checks a client's hello (its token); raises a BastionError (PeerRefused) to refuse it.
Authenticate = Callable[[dict[str, Any]], None]


async def serve(
    harness: Harness,
    conn: Connection,
    *,
    owner: bool = False,
    authenticate: Authenticate | None = None,
    subscriptions: dict[int, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
) -> bool:
    """Serve `conn` until it ends (False) or its owner closes the harness (True; the
    caller closes it). `subscriptions`: ones the caller took before serving (the
    app's first view), by the client's numbers for them. `limit`: the events a
    subscription holds for a client that does not read before it is told to resync."""
    try:
        hello = await asyncio.wait_for(conn.receive(), HELLO_TIMEOUT)
    except (TimeoutError, ProtocolError):
        hello = None
    try:
        _check_hello(hello, authenticate)
    except BastionError as exc:
        await _send_quietly(conn, {"hello": None, "error": p.encode_error(exc)})
        return False
    await conn.send({"hello": {"version": VERSION, "pid": os.getpid()}})
    session = _Session(harness, conn, owner, limit)
    # A harness closed elsewhere ends the connection (the one that closes it ends itself,
    # once the close's reply is sent); one a storage error closed does not (`ended`).
    session.ender = session.start(session.ended())
    for sub, taken in (subscriptions or {}).items():
        session.forward(sub, taken)
    try:
        return await session.run()
    finally:
        await session.stop()


def _check_hello(hello: dict[str, Any] | None, authenticate: Authenticate | None) -> None:
    said = hello.get("hello") if isinstance(hello, dict) else None
    if not isinstance(said, dict):
        raise ProtocolError("the first message was not a hello", hint='send {"hello": {...}}')
    version = said.get("version")
    if not isinstance(version, int) or version != VERSION:
        raise ProtocolError(
            f"protocol version {version!r} is not this harness's ({VERSION})",
            hint="use the same bastion version on both ends",
        )
    if authenticate is not None:
        authenticate(said)


async def _send_quietly(conn: Connection, message: dict[str, Any]) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        await conn.send(message)


class _Session:
    """One connection: requests read and applied, replies and events written in order.

    Everything the client is sent goes through one queue (`out`) and one writer, so a
    reply comes after every event the harness published before it was made: a client
    that waits for a run to end (`wait_run`) has that run's events already. Each
    subscription's events wait in a bounded channel until the queue has room.
    """

    ROOM = 64  # messages queued for the writer before subscriptions wait

    def __init__(self, harness: Harness, conn: Connection, owner: bool, limit: int) -> None:
        self.harness = harness
        self.limit = limit
        self.conn = conn
        self.owner = owner
        self.tasks: set[asyncio.Task[None]] = set()
        self.ender: asyncio.Task[None] | None = None
        self.subs: dict[int, tuple[Any, EventChannel]] = {}
        self.out: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.room = asyncio.Event()
        self.room.set()
        self.start(self.write())

    def start(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def run(self) -> bool:
        while True:
            try:
                message = await self.conn.receive()
            except ProtocolError as exc:
                self.reply_error(None, exc)
                continue
            if message is None:
                return False
            try:
                request_id, op = p.decode_request(message)
            except ProtocolError as exc:
                self.reply_error(message.get("id"), exc)
                continue
            if isinstance(op, p.Subscribe):
                self.forward(op.sub, self.harness.subscribe(op.conversation), join=op.join)
                self.reply(request_id, op, None)
            elif isinstance(op, p.Unsubscribe):
                self.drop(op.sub)
                self.reply(request_id, op, None)
            elif isinstance(op, p.Park) and self.owner:
                if await self.park(request_id, op):
                    return True
            elif isinstance(op, p.Close | p.Park):
                if self.owner:
                    if self.ender is not None:  # (this connection ends after the reply)
                        self.ender.cancel()
                    report = await self.harness.close()
                    self.reply(request_id, op, report)
                    await self.flush()
                    return True
                self.reply_error(
                    request_id,
                    BastionError(
                        "only the process that started this harness may close it",
                        hint="leave with Ctrl+C; the session goes on",
                    ),
                )
            elif isinstance(op, p.NewSession | p.SwitchSession):
                # Another client still on the conversation this one leaves keeps it driven.
                mine = sum(s.conversation_id == op.conversation for s, _ in self.subs.values())
                keep = self.harness.followers(op.conversation) > mine
                self.start(self.answer(request_id, op, keep=keep))
            else:
                self.start(self.answer(request_id, op))

    async def park(self, request_id: Any, op: p.Park) -> bool:
        """The owner's `park`: true once the harness parked and said so (its front end
        closes it: the app's harness process, as the connection ends)."""
        try:
            parked = await self.harness.park(op.conversation, op.pid)
        except BastionError as exc:
            self.reply_error(request_id, exc)
            return False
        if self.ender is not None:  # (this connection ends after the reply)
            self.ender.cancel()
        self.reply(request_id, op, parked)
        await self.flush()
        return True  # (the connection ends before the harness closes: its subscriptions
        # end without an `ended`, and the client keeps its channels for the next one)

    async def ended(self) -> None:
        """Once the harness has closed: end the connection; but a harness a storage error
        closed (seed 004) keeps it, after everything it published (its `SessionFailed`
        last), so the client hears why, and each op it sends after gets the typed
        `SessionFailedError` in reply rather than a connection that went."""
        await self.harness.wait_closed()
        if self.harness.failure is None:
            self.conn.abort()
            return
        for sub in list(self.subs):
            self.drop(sub)  # (each subscription: what it published, then `ended`)

    async def answer(self, request_id: Any, op: p.Op, *, keep: bool = False) -> None:
        if self.harness.failure is not None:  # a storage error ended it: every op is
            self.reply_error(request_id, self.harness.failure)  # told so, even a ping
            return
        try:
            if isinstance(op, p.NewSession):
                value: Any = await self.harness.new_session(op.conversation, keep=keep)
            elif isinstance(op, p.SwitchSession):
                value = await self.harness.switch_session(op.conversation, op.to, keep=keep)
            else:
                value = await apply(self.harness, op)
        except BastionError as exc:
            self.reply_error(request_id, exc)
        except Exception as exc:  # a bug: said, logged, the connection goes on
            log.exception("op %s failed", op.name)
            self.reply_error(
                request_id, BastionError(f"{op.name} failed: {type(exc).__name__}: {exc}")
            )
        else:
            self.reply(request_id, op, value)

    def reply(self, request_id: Any, op: p.Op, value: Any) -> None:
        self.send_after_events({"id": request_id, "ok": True, "result": p.encode_result(op, value)})

    def reply_error(self, request_id: Any, exc: BastionError) -> None:
        self.send_after_events({"id": request_id, "ok": False, "error": p.encode_error(exc)})

    def send_after_events(self, message: dict[str, Any]) -> None:
        """Queue `message` behind every event published so far (synchronously: no other
        task runs between taking the events and queueing the message)."""
        for sub, (subscription, channel) in self.subs.items():
            channel.put_many(subscription.pending())
            self.queue_batch(sub, channel.poll())
        self.queue(message)

    def queue(self, message: dict[str, Any]) -> None:
        self.out.put_nowait(message)
        if self.out.qsize() >= self.ROOM:
            self.room.clear()

    def queue_batch(self, sub: int, batch: Any) -> None:
        if batch is None:
            self.queue({"sub": sub, "ended": True})
        elif batch is RESYNC:
            self.queue({"sub": sub, "resync": True})
        elif batch:
            self.queue({"sub": sub, "events": [p.encode_event(e) for e in batch]})

    async def write(self) -> None:
        """The one writer: whatever is queued, oldest first, in as few writes as it can."""
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                messages = [await self.out.get()]
                while not self.out.empty():
                    messages.append(self.out.get_nowait())
                if self.out.qsize() < self.ROOM:
                    self.room.set()
                await self.conn.send_many(messages)

    async def flush(self) -> None:
        while not self.out.empty():
            await asyncio.sleep(0)

    def forward(self, sub: int, subscription: Any, *, join: bool = True) -> None:
        self.drop(sub)
        # stream-json subscribers (join False) lose no delta: their channel is unbounded
        channel = EventChannel(self.limit) if join else EventChannel(limit=1 << 62, join=False)
        self.subs[sub] = (subscription, channel)
        self.start(pump(subscription, channel))
        self.start(self.move(sub, channel))

    def drop(self, sub: int) -> None:
        """End subscription `sub`: what it published so far still goes out, then `ended`."""
        found = self.subs.pop(sub, None)
        if found is not None:
            subscription, channel = found
            channel.put_many(subscription.pending())
            subscription.close()
            channel.close()

    async def move(self, sub: int, channel: EventChannel) -> None:
        """A subscription's batches into the queue, as the queue has room."""
        while True:
            await self.room.wait()
            batch = await channel.get()
            self.queue_batch(sub, batch)  # (no await between taking it and queueing it)
            if batch is None:
                return

    async def stop(self) -> None:
        for subscription, channel in self.subs.values():
            subscription.close()
            channel.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.conn.close()


async def apply(harness: Harness, op: p.Op) -> Any:
    """What `op` does, through the harness's own typed call."""
    match op:
        case p.Submit():
            return await harness.submit(
                op.conversation, op.text, request_key=op.request_key, mode=op.mode,
                create=op.create, when_busy=op.when_busy,
            )  # fmt: skip
        case p.Write():
            return await harness.write(op.conversation, op.text)
        case p.Withdraw():
            return await harness.withdraw(op.conversation, op.item)
        case p.SendHeld():
            return await harness.send_held(op.conversation)
        case p.Interrupt():
            return await harness.interrupt(op.conversation)
        case p.Redirect():
            return await harness.redirect(op.conversation, op.text, request_key=op.request_key)
        case p.Supersede():
            return await harness.supersede(op.conversation, op.text, request_key=op.request_key)
        case p.Reset():
            return await harness.reset(op.conversation, op.instructions)
        case p.Respond():
            return await harness.respond(
                op.conversation, op.tool_call, op.approve, always=op.always, message=op.message,
                sandbox=op.sandbox,
            )  # fmt: skip
        case p.ProposedRules():
            return await harness.proposed_rules(op.conversation, op.tool_call, op.scope)
        case p.Rules():
            return await harness.rules(op.conversation)
        case p.Compact():
            return await harness.compact(op.conversation, op.instructions)
        case p.CancelCompaction():
            return await harness.cancel_compaction(op.conversation)
        case p.Snapshot():
            return await harness.snapshot(op.conversation, op.last)
        case p.Settings():
            return await harness.session_settings(op.conversation)
        case p.SetApprovalMode():
            return await harness.set_approval_mode(op.conversation, op.mode)
        case p.SetModel():
            return await harness.set_model(op.conversation, op.spec)
        case p.SetReasoningEffort():
            return await harness.set_reasoning_effort(op.conversation, op.effort)
        case p.SetDefaults():
            return await harness.set_defaults(
                op.conversation, model=op.model, approval_mode=op.approval_mode
            )
        case _:
            return await _apply_sessions(harness, op)


async def _apply_sessions(harness: Harness, op: p.Op) -> Any:
    match op:
        case p.NewSession():
            return await harness.new_session(op.conversation)
        case p.SwitchSession():
            return await harness.switch_session(op.conversation, op.to)
        case p.Fork():
            return await harness.fork(op.conversation, op.at_entry)
        case p.Rewind():
            return await harness.rewind(op.conversation, op.entry)
        case p.PlanRestore():
            return await harness.restore_plan(op.conversation, op.entry)
        case p.Restore():
            return await harness.restore(op.plan)
        case p.Export():
            return await harness.export(op.conversation)
        case p.Usage():
            return await harness.usage(op.conversation)
        case p.McpServers():
            return await harness.mcp_servers(wait=op.wait)
        case p.McpPrompts():
            return await harness.mcp_prompts()
        case p.McpResources():
            return await harness.mcp_resources()
        case p.GetMcpPrompt():
            return await harness.mcp_prompt(op.server, op.prompt, dict(op.arguments))
        case p.ReadMcpResource():
            return await harness.mcp_resource(op.server, op.uri)
        case p.Jobs():
            return await harness.jobs(op.conversation)
        case p.StopJob():
            return await harness.stop_job(op.conversation, op.job, why=op.why)
        case p.Agents():
            return await harness.agents(op.conversation)
        case p.StopAgent():
            return await harness.stop_agent(op.conversation, op.agent)
        case p.Search():
            return await harness.search(op.query, op.limit)
        case p.Sessions():
            return await harness.session_summaries(op.limit)
        case p.ResolveId():
            return await harness.resolve_id(op.text)
        case p.ShortIds():
            return await harness.short_ids(op.ids)
        case _:
            return await _apply_runs(harness, op)


async def _apply_runs(harness: Harness, op: p.Op) -> Any:
    match op:
        case p.WaitRun(item=str(item)):
            return await harness.wait(item, op.conversation)
        case p.WaitRun(run=str(run)):
            return await harness.wait_run(run, op.conversation)
        case p.WaitIdle():
            return await harness.wait_idle(op.conversation)
        case p.GetConversation():
            return await harness.get_conversation(op.conversation)
        case p.Answer():
            found = await harness.store.run(op.run)
            if found is None:
                raise ProtocolError(f"no run {op.run}")
            return await harness.answer(found)
        case p.RunCalls():
            found = await harness.store.run(op.run)
            if found is None:
                raise ProtocolError(f"no run {op.run}")
            return tuple(await harness.run_calls(found))
        case p.Ping():
            return None
    raise ProtocolError(f"{op.name} cannot be applied here")


serve_connection = serve  # (the name the runtime's public API gives it)
