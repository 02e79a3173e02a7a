"""Issue 25, item 9: attach follows instead of giving up.

A hello cut short (the driver killed mid-line) used to raise JSONDecodeError out of
`Follower.views()`; now the follower reads the ledger. And the client's queue of
messages is bounded: a consumer that falls behind stops the reading, so the
driver's per-client limit (a snapshot in place of what was dropped) holds.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from runtime.ipc.attach import AttachClient, Follower
from runtime.ipc.peer import TokenFile
from runtime.ipc.serve import private_dir, socket_path, view_to_wire
from runtime.testing.scripted import ScriptedProvider
from tests.runtime.helpers import open_harness


async def serve_once(path: Path, send) -> asyncio.AbstractServer:  # type: ignore[no-untyped-def]
    private_dir(path.parent)
    TokenFile(path).write()  # what a real server leaves for its clients

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the client's hello (its token), taken as given here
        await send(writer)
        writer.close()

    return await asyncio.start_unix_server(client, str(path))


async def test_attach_follow_a_hello_cut_short_falls_back_to_the_ledger(tmp_path: Path) -> None:
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    path = socket_path(harness.home, conv.id)

    async def cut(writer: asyncio.StreamWriter) -> None:
        writer.write(b'{"type": "hello", "protocol": 1, "pid": 4')  # then killed
        await writer.drain()

    server = await serve_once(path, cut)
    follower = Follower(harness, conv.id, poll=0.02)
    views = follower.views()
    try:
        first = await anext(views)
        await harness.submit(conv.id, "typed while nobody drives it")
        later = await asyncio.wait_for(anext(views), 5)
        assert follower.source == "ledger"
        assert later.version > first.version
        assert [e.text for e in later.entries] == ["typed while nobody drives it"]
    finally:
        await views.aclose()
        server.close()
        await harness.close()


async def test_attach_follow_the_reader_queue_is_bounded(tmp_path: Path) -> None:
    harness = await open_harness(tmp_path, ScriptedProvider([]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    view = await harness.snapshot(conv.id)
    path = tmp_path / "attach.sock"
    hello = {"type": "hello", "protocol": 1, "pid": 1, "view": view_to_wire(view)}
    sent = 0

    async def flood(writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        writer.write(json.dumps(hello).encode() + b"\n")
        big = {"type": "event", "event": {"type": "x", "pad": "b" * 3_000_000}}
        writer.write(json.dumps(big).encode() + b"\n")  # longer than the read buffer
        line = json.dumps({"type": "event", "event": {"type": "x", "pad": "p" * 200}}) + "\n"
        try:
            for _ in range(20_000):  # some 4 MB: far more than the socket holds
                writer.write(line.encode())
                sent += 1
                await writer.drain()
        except ConnectionError:
            pass

    server = await serve_once(path, flood)
    client = await AttachClient.connect(path)
    assert client is not None
    try:
        await asyncio.sleep(0.5)  # the consumer reads nothing meanwhile
        queued = client._messages.qsize()
        assert 0 < queued <= 2048, queued
        assert sent < 20_000  # the server was held back, not the client's memory grown
        got: list[dict] = []
        while len(got) < 20_001 and (batch := await asyncio.wait_for(client.messages(), 5)):
            got += batch
        assert len(got) == 20_001  # nothing was lost on the way
        assert len(got[0]["event"]["pad"]) == 3_000_000
    finally:
        await client.close()
        server.close()
        await harness.close()
