"""The attach socket (runtime.ipc.listen): where it lives, who may connect, and that a
client on it speaks the one protocol (runtime.model.protocol) as the app does."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from runtime import reduce
from runtime.ipc.client import HarnessClient
from runtime.ipc.listen import (
    MAX_PATH,
    PeerRefused,
    SocketUnsafe,
    check_peer,
    peer_uid,
    private_dir,
    socket_path,
)
from runtime.ipc.peer import read_token
from runtime.ipc.wire import Connection
from runtime.model import protocol as p
from runtime.model.errors import BastionError, NotPending
from runtime.model.events import TextDelta
from runtime.model.records import InboxMode
from runtime.model.views import TextDeltas
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness

CONV = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"


async def attach(harness, conversation_id: str) -> HarnessClient:
    """A client on the conversation's socket with its token, as `bastion attach` is."""
    path = socket_path(harness.home, conversation_id)
    conn = await Connection.unix(str(path))
    return await HarnessClient.connect(conn, client="attach", token=read_token(path))


async def connect_raw(
    path: Path, limit: int = 1 << 24
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare connection that says hello with the token and reads nothing yet (the
    reader stops taking from the socket once `limit` * 2 bytes wait in it)."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=limit)
    hello = {"hello": {"version": p.VERSION, "client": "raw", "token": read_token(path)}}
    writer.write(json.dumps(hello).encode() + b"\n")
    return reader, writer


def test_the_socket_sits_beside_a_short_store(tmp_path):
    home = Path("/tmp") / "b"
    assert socket_path(home, CONV) == home / "sockets" / f"{CONV}.sock"


def test_a_long_home_falls_back_to_a_short_private_path(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    home = tmp_path / ("x" * 120)
    path = socket_path(home, CONV)
    assert len(os.fsencode(path)) <= MAX_PATH
    assert path.parent.parent.name == f"bastion-{os.getuid()}"
    assert socket_path(home, CONV) == path  # every process finds the same one
    assert socket_path(tmp_path / ("y" * 120), CONV) != path  # another store, another path


def test_a_private_dir_is_made_0700_and_a_loose_one_tightened(tmp_path):
    target = tmp_path / "bastion-1" / "abc"
    private_dir(target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(target.parent).st_mode) == 0o700
    os.chmod(target, 0o755)
    private_dir(target)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700


def test_a_symlink_in_place_of_the_directory_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "bastion-1").symlink_to(elsewhere)
    with pytest.raises(SocketUnsafe, match="not a folder of this user"):
        private_dir(tmp_path / "bastion-1" / "abc")
    assert list(elsewhere.iterdir()) == []  # nothing was made through the link


def test_a_peer_of_another_uid_is_refused():
    check_peer(os.getuid())
    check_peer(None)  # a platform that cannot tell: the 0700 directory guards
    with pytest.raises(PeerRefused, match="uid 4242 tried to attach; only uid 1000 may"):
        check_peer(4242, own=1000)


def test_peer_uid_reads_the_other_end_of_a_unix_socket():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_uid(a) == os.getuid()


def test_events_cross_the_wire_unchanged():
    delta = TextDelta(CONV, "run", 7, 3, "entry", 5, "héllo\u2028")
    joined = TextDeltas(CONV, "run", 7, 3, 5, "entry", 5, "abc")
    for event in (delta, joined):
        assert p.decode_event(json.loads(json.dumps(p.encode_event(event)))) == event


async def served(tmp_path, turns, **settings):
    harness = await open_harness(tmp_path, ScriptedProvider(turns), **settings)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    return harness, conv


async def test_the_driver_serves_an_owner_only_socket_and_removes_it(tmp_path):
    harness, conv = await served(tmp_path, [])
    path = socket_path(harness.home, conv.id)
    try:
        info = os.stat(path)
        assert stat.S_ISSOCK(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    finally:
        await harness.close()
    assert not path.exists()
    assert read_token(path) is None  # the token goes with it


async def test_a_client_sees_every_delta_and_the_view_matches_the_driver(tmp_path):
    turn = ScriptedTurn(text="one two three four five six", chunk_size=2, delay=0.01)
    harness, conv = await served(tmp_path, [turn], checkpoint_interval=10.0)
    try:
        client = await attach(harness, conv.id)
        assert client.server_pid == os.getpid()
        channel = client.subscribe(conv.id)
        view = await client.snapshot(conv.id)
        await client.submit(conv.id, "count")
        deltas = 0
        while view.active_run is not None or not view.runs:
            batch = await asyncio.wait_for(channel.get(), 5)
            assert isinstance(batch, list)
            for event in batch:
                deltas += isinstance(event, TextDelta | TextDeltas)
                view = reduce(view, event)
            assert not view.resync_required
        assert deltas >= 1  # checkpoints every 10 s: the text came as deltas
        assert view.entries[-1].text == "one two three four five six"
        mine = p.view_to_wire(view)
        theirs = p.view_to_wire(await harness.snapshot(conv.id))
        for key in ("version", "entries", "runs", "inbox", "tool_calls"):
            assert mine[key] == theirs[key], key
        await client.close()
    finally:
        await harness.close()


async def test_ops_are_applied_by_the_driver_and_refusals_come_back_typed(tmp_path):
    turn = ScriptedTurn(text="slow answer here", chunk_size=1, delay=0.02)
    harness, conv = await served(tmp_path, [turn, ScriptedTurn(text="second")])
    try:
        client = await attach(harness, conv.id)
        await harness.submit(conv.id, "first")
        item = await client.submit(conv.id, "and then", mode=InboxMode.FOLLOW_UP)
        assert item.state == "queued" and item.mode == "follow_up"
        with pytest.raises(NotPending, match="not waiting for approval"):
            await client.respond(conv.id, "nope", True)
        with pytest.raises(BastionError, match="only the process that started"):
            await client.call(p.Close())  # an attached client cannot close the harness
        await asyncio.wait_for(client.wait_idle(conv.id), 10)
        snap = await harness.snapshot(conv.id)
        assert [e.text for e in snap.entries] == ["first", "slow answer here", "and then", "second"]
        await client.close()
    finally:
        await harness.close()


async def test_a_hello_without_the_token_is_refused_in_one_line(tmp_path):
    harness, conv = await served(tmp_path, [])
    path = socket_path(harness.home, conv.id)
    try:
        for token in (None, "0" * 64):
            conn = await Connection.unix(str(path))
            with pytest.raises(PeerRefused, match="did not give the session's token"):
                await HarnessClient.connect(conn, client="attach", token=token)
        client = await attach(harness, conv.id)  # the harness goes on serving
        await client.ping()
        await client.close()
    finally:
        await harness.close()


async def test_a_bad_request_line_gets_one_clear_refusal_and_the_connection_goes_on(tmp_path):
    harness, conv = await served(tmp_path, [])
    reader, writer = await connect_raw(socket_path(harness.home, conv.id))
    try:
        assert "hello" in json.loads(await reader.readline())
        writer.write(b"not json\n")
        reply = json.loads(await reader.readline())
        assert reply["ok"] is False and reply["error"]["code"] == "protocol"
        writer.write(json.dumps({"id": 2, "op": "dance", "args": {}}).encode() + b"\n")
        reply = json.loads(await reader.readline())
        assert reply["id"] == 2 and reply["ok"] is False and "dance" in reply["error"]["message"]
        writer.write(json.dumps({"id": 3, "op": "ping", "args": {}}).encode() + b"\n")
        assert json.loads(await reader.readline()) == {"id": 3, "ok": True, "result": None}
    finally:
        writer.close()
        await harness.close()


async def test_a_client_that_stops_reading_is_resynced_and_the_harness_never_waits(tmp_path):
    # 2 MB of reasoning, a checkpoint after every chunk: the unread socket fills, the
    # writer's queue fills, the subscription's bounded channel overflows.
    turn = ScriptedTurn(reasoning="r" * 2_000_000, text="done", chunk_size=2000)
    harness, conv = await served(tmp_path, [turn], checkpoint_interval=0.0)
    harness.serving.listener(conv.id).limit = 8
    path = socket_path(harness.home, conv.id)
    # A small read buffer (64 KB), so the unread socket fills; lines are split here, as
    # `read` takes no notice of the buffer's line limit.
    reader, writer = await connect_raw(path, limit=1 << 16)
    pending = b""

    async def next_line() -> bytes:
        nonlocal pending
        while b"\n" not in pending:
            pending += await asyncio.wait_for(reader.read(1 << 16), 10)
        raw, pending = pending.split(b"\n", 1)
        return raw

    try:
        assert "hello" in json.loads(await next_line())
        request = {"id": 1, "op": "subscribe", "args": {"conversation": conv.id, "sub": 1}}
        writer.write(json.dumps(request).encode() + b"\n")
        item = await harness.submit(conv.id, "go")
        run = await asyncio.wait_for(harness.wait(item.id, conv.id), 60)
        assert run.state == "completed"  # the harness did not wait for the reader
        resynced = False
        while not resynced:
            resynced = json.loads(await next_line()).get("resync") is True
    finally:
        writer.close()
        await harness.close()


NOBODY_CONNECTS = """
import os, socket, sys
os.setgid(65534)
os.setuid(65534)
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print(s.makefile().readline(), end="")
"""


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another uid needs root")
async def test_another_uid_is_refused_even_if_the_directory_were_opened(monkeypatch):
    runtime_dir = Path(tempfile.mkdtemp(prefix="bt", dir="/tmp"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
        home = runtime_dir / ("h" * 100)  # too long: the socket goes under XDG_RUNTIME_DIR
        home.mkdir()
        harness, conv = await served(home, [])
        path = socket_path(harness.home, conv.id)
        assert runtime_dir in path.parents
        for directory in (runtime_dir, path.parent.parent, path.parent):
            os.chmod(directory, 0o755)  # what the 0700 directory normally prevents
        os.chmod(path, 0o666)
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", NOBODY_CONNECTS, str(path), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(child.communicate(), 10)
        reply = json.loads(out)
        assert reply["hello"] is None and reply["error"]["code"] == "peer_refused"
        assert "uid 65534 tried to attach" in reply["error"]["message"]
        await harness.close()
    finally:
        shutil.rmtree(runtime_dir)


async def test_closing_does_not_wait_for_a_client_that_stopped_reading(tmp_path):
    turn = ScriptedTurn(reasoning="r" * 20_000, text="done", chunk_size=1)
    harness, conv = await served(tmp_path, [turn])
    reader, writer = await connect_raw(socket_path(harness.home, conv.id))
    try:
        await reader.readline()
        request = {"id": 1, "op": "subscribe", "args": {"conversation": conv.id, "sub": 1}}
        writer.write(json.dumps(request).encode() + b"\n")
        item = await harness.submit(conv.id, "go")
        run = await asyncio.wait_for(harness.wait(item.id, conv.id), 60)
        assert run.state == "completed"  # the run did not wait for the reader either
        await asyncio.wait_for(harness.close(), 30)  # its socket buffer is full, unread
        assert not socket_path(harness.home, conv.id).exists()
    finally:
        writer.close()
