"""Issue 35: the one protocol. Every op round-trips through JSON unchanged; a harness
served over the real transport answers a client's typed calls and streams events;
malformed, truncated, oversized and unknown frames, a newer version and a client
that leaves mid-turn each get one typed error and leave the harness serving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from runtime.ipc.client import HarnessClient
from runtime.ipc.server import serve
from runtime.ipc.wire import Connection, connect_pair
from runtime.model import protocol as p
from runtime.model.errors import BastionError, HarnessGone, UnknownConversation
from runtime.model.records import Conversation, InboxMode
from runtime.model.results import FileRestore, RestorePlan
from runtime.model.views import ConversationView, reduce
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness

SAMPLES: dict[type, Any] = {
    str: "héllo\u2028\n\x1b[2K",
    bool: True,
    int: 7,
    InboxMode: InboxMode.STEER,
}


def sample(op_type: type[p.Op]) -> p.Op:
    """An op with every field set to a value of its type (or its default)."""
    values: dict[str, Any] = {}
    for f in msgspec.structs.fields(op_type):
        kind = getattr(f.type, "__name__", str(f.type))  # ("int", "InboxMode", "str | None")
        if f.name == "plan":
            values[f.name] = RestorePlan(
                "c", "e", "/w", (FileRestore("a.txt", b"\x00\xffbytes", "why", "absent"),), ("x",)
            )
        elif f.name == "create":
            values[f.name] = Conversation("c", "t", "/w", {"model": "m"}, 1.0, 2.0)
        elif f.name == "arguments":
            values[f.name] = {"file": "x.py"}
        elif f.name == "ids":
            values[f.name] = ("a", "b")
        elif kind.startswith("InboxMode"):
            values[f.name] = InboxMode.STEER
        elif kind.startswith("bool"):
            values[f.name] = True
        elif kind.startswith("int"):
            values[f.name] = 7
        else:
            values[f.name] = SAMPLES[str]
    return op_type(**values)


@pytest.mark.parametrize("name", sorted(p.OPS))
def test_every_op_round_trips_through_json(name):
    op = sample(p.OPS[name])
    wire = json.loads(json.dumps(p.encode_request(3, op)))
    assert p.decode_request(wire) == (3, op)


@pytest.mark.parametrize(
    "message, said",
    [
        ({"id": 1, "op": "launch_missiles"}, "unknown op"),
        ({"id": 1, "op": "submit", "args": {"conversation": 5, "text": "x"}}, "bad arguments"),
        ({"id": 1, "op": "submit", "args": {"text": "x"}}, "bad arguments"),
        ({"id": 1, "op": "submit", "args": ["x"]}, "not an object"),
        ({"id": 1, "op": "withdraw", "args": {"conversation": "c", "item": None}}, "bad arguments"),
    ],
)
def test_a_bad_request_is_one_typed_error(message, said):
    with pytest.raises(p.ProtocolError, match=said):
        p.decode_request(message)


def test_errors_come_back_as_their_type():
    raw = json.loads(json.dumps(p.encode_error(UnknownConversation("no such", hint="look"))))
    exc = p.decode_error(raw)
    assert type(exc) is UnknownConversation and exc.message == "no such" and exc.hint == "look"
    other = p.decode_error({"code": "something_new", "message": "m"})
    assert type(other) is BastionError and other.code == "something_new"


async def served(tmp_path: Path, turns: list[ScriptedTurn]):
    harness = await open_harness(tmp_path, ScriptedProvider(turns), RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    theirs, ours = await connect_pair()
    serving = asyncio.create_task(serve(harness, theirs, owner=True))
    client = await HarnessClient.connect(ours, client="test", owner=True)
    return harness, conv.id, client, serving


async def test_a_client_drives_a_turn_and_folds_its_events(tmp_path):
    _, conv_id, client, serving = await served(
        tmp_path, [ScriptedTurn(text="hello over the wire", chunk_size=3)]
    )
    try:
        channel = client.subscribe(conv_id)
        view: ConversationView = await client.snapshot(conv_id)
        item = await client.submit(conv_id, "hi")
        run = await client.wait(item.id, conv_id)
        assert run.state == "completed"
        assert await client.answer(conv_id, run.id) == "hello over the wire"
        while True:  # the same reducer folds what crossed the wire
            batch = await asyncio.wait_for(channel.get(), 10)
            assert isinstance(batch, list)
            for event in batch:
                view = reduce(view, event)
            if view.runs and view.runs[-1].state == "completed":
                break
        assert view.entries[-1].text == "hello over the wire"
        assert (await client.snapshot(conv_id)).entries[-1].text == "hello over the wire"
        with pytest.raises(UnknownConversation):
            await client.snapshot("0192f7a4-0000-7000-8000-000000000000")
    finally:
        await client.close()
    assert await serving is True  # the owner closed the harness


async def raw(tmp_path: Path) -> tuple[Any, str, Connection, asyncio.Task[bool]]:
    harness = await open_harness(tmp_path, ScriptedProvider([]), RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    theirs, ours = await connect_pair()
    serving = asyncio.create_task(serve(harness, theirs))
    return harness, conv.id, ours, serving


async def test_garbage_frames_get_one_error_each_and_the_connection_goes_on(tmp_path):
    harness, conv_id, conn, serving = await raw(tmp_path)
    try:
        await conn.send({"hello": {"version": p.VERSION, "client": "fuzz"}})
        assert (await conn.receive())["hello"]["version"] == p.VERSION
        conn.writer.write(b'not json\n[1, 2]\n{"id": 5, "op": "nope"}\n')
        conn.writer.write(b'{"id": 6, "op": "snapshot", "args": {"conversation": 9}}\n')
        conn.writer.write(b"x" * (p.MAX_LINE + 10) + b"\n")  # oversized: skipped whole
        await conn.send(p.encode_request(7, p.Ping()))
        replies = [await asyncio.wait_for(conn.receive(), 30) for _ in range(6)]
        errors = [r for r in replies if r["ok"] is False]
        assert [r["error"]["code"] for r in errors] == ["protocol"] * 5
        assert replies[-1] == {"id": 7, "ok": True, "result": None}
        assert (await harness.snapshot(conv_id)).conversation.id == conv_id
    finally:
        await conn.close()
        await serving
        await harness.close()


async def test_another_version_is_refused_at_hello(tmp_path):
    harness, _, conn, serving = await raw(tmp_path)
    try:
        await conn.send({"hello": {"version": p.VERSION + 1, "client": "future"}})
        answer = await conn.receive()
        assert answer["hello"] is None and answer["error"]["code"] == "protocol"
        assert "version" in answer["error"]["message"]
        assert await serving is False
    finally:
        await harness.close()


async def test_a_client_that_leaves_mid_turn_loses_nothing(tmp_path):
    turn = ScriptedTurn(text="a" * 4000, chunk_size=1)
    harness, conv_id, client, serving = await served(tmp_path, [turn])
    item = await client.submit(conv_id, "go")
    client.subscribe(conv_id)
    await client.conn.close()  # gone, mid-stream, without a word
    assert await serving is False
    run = await harness.wait(item.id, conv_id)
    assert run.state == "completed"  # the harness went on
    assert (await harness.snapshot(conv_id)).entries[-1].text == "a" * 4000
    with pytest.raises(HarnessGone):
        await client.snapshot(conv_id)
    await harness.close()


async def test_only_the_owner_may_close_the_harness(tmp_path):
    harness, conv_id, conn, serving = await raw(tmp_path)
    client = await HarnessClient.connect(conn, client="guest")
    try:
        with pytest.raises(BastionError, match="only the process that started"):
            await client.call(p.Close())
        assert (await client.snapshot(conv_id)).conversation.id == conv_id
    finally:
        await client.close()
        await serving
        await harness.close()
