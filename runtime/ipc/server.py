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
from runtime.ipc.channel import RESYNC, EventChannel, pump
from runtime.ipc.wire import Connection
from runtime.model import protocol as p
from runtime.model.errors import BastionError
from runtime.model.protocol import VERSION, ProtocolError

__all__ = ["Authenticate", "apply", "serve"]

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
) -> bool:
    """Serve `conn` until it ends (False) or its owner closes the harness (True; the
    caller closes it). `subscriptions`: ones the caller took before serving (the
    app's first view), by the client's numbers for them."""
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
    session = _Session(harness, conn, owner)
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
    def __init__(self, harness: Harness, conn: Connection, owner: bool) -> None:
        self.harness = harness
        self.conn = conn
        self.owner = owner
        self.tasks: set[asyncio.Task[None]] = set()
        self.subs: dict[int, tuple[EventChannel, list[asyncio.Task[None]]]] = {}

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
                await self.reply_error(None, exc)
                continue
            if message is None:
                return False
            try:
                request_id, op = p.decode_request(message)
            except ProtocolError as exc:
                await self.reply_error(message.get("id"), exc)
                continue
            if isinstance(op, p.Subscribe):
                self.forward(op.sub, self.harness.subscribe(op.conversation))
                await self.reply(request_id, op, None)
            elif isinstance(op, p.Unsubscribe):
                self.drop(op.sub)
                await self.reply(request_id, op, None)
            elif isinstance(op, p.Close):
                if self.owner:
                    await self.harness.close()
                    await self.reply(request_id, op, None)
                    return True
                await self.reply_error(
                    request_id,
                    BastionError(
                        "only the process that started this harness may close it",
                        hint="leave with Ctrl+C; the session goes on",
                    ),
                )
            else:
                self.start(self.answer(request_id, op))

    async def answer(self, request_id: Any, op: p.Op) -> None:
        try:
            value = await apply(self.harness, op)
        except BastionError as exc:
            await self.reply_error(request_id, exc)
        except Exception as exc:  # a bug: said, logged, the connection goes on
            log.exception("op %s failed", op.name)
            await self.reply_error(
                request_id, BastionError(f"{op.name} failed: {type(exc).__name__}: {exc}")
            )
        else:
            await self.reply(request_id, op, value)

    async def reply(self, request_id: Any, op: p.Op, value: Any) -> None:
        message = {"id": request_id, "ok": True, "result": p.encode_result(op, value)}
        await _send_quietly(self.conn, message)

    async def reply_error(self, request_id: Any, exc: BastionError) -> None:
        await _send_quietly(
            self.conn, {"id": request_id, "ok": False, "error": p.encode_error(exc)}
        )

    def forward(self, sub: int, subscription: Any) -> None:
        self.drop(sub)
        channel = EventChannel()
        tasks = [self.start(pump(subscription, channel)), self.start(self.send(sub, channel))]
        self.subs[sub] = (channel, tasks)

    def drop(self, sub: int) -> None:
        found = self.subs.pop(sub, None)
        if found is not None:
            found[0].close()

    async def send(self, sub: int, channel: EventChannel) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while (batch := await channel.get()) is not None:
                if batch is RESYNC:
                    await self.conn.send({"sub": sub, "resync": True})
                else:
                    assert isinstance(batch, list)
                    await self.conn.send({"sub": sub, "events": [p.encode_event(e) for e in batch]})
            await self.conn.send({"sub": sub, "ended": True})

    async def stop(self) -> None:
        for channel, _ in self.subs.values():
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
                create=op.create,
            )  # fmt: skip
        case p.Withdraw():
            return await harness.withdraw(op.conversation, op.item)
        case p.SendHeld():
            return await harness.send_held(op.conversation)
        case p.Interrupt():
            return await harness.interrupt(op.conversation)
        case p.Redirect():
            return await harness.redirect(op.conversation, op.text, request_key=op.request_key)
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
