"""The attach socket in one process: where it lives, who may connect, what it serves."""

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

from runtime import Follower, reduce
from runtime.ipc.attach import AttachClient, RemoteError
from runtime.ipc.serve import (
    MAX_PATH,
    AttachServer,
    PeerRefused,
    SocketUnsafe,
    check_peer,
    decode_event,
    encode_event,
    peer_uid,
    private_dir,
    socket_path,
    view_from_wire,
    view_to_wire,
)
from runtime.model.errors import BastionError
from runtime.model.events import TextDelta
from runtime.model.records import InboxMode
from runtime.model.views import TextDeltas
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness


async def connect_raw(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare connection to a served socket that gives the session's token, as
    `bastion attach` does (runtime.ipc.peer)."""
    from runtime.ipc.peer import read_token

    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(json.dumps({"op": "hello", "token": read_token(path)}).encode() + b"\n")
    return reader, writer


CONV = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"


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
    with pytest.raises(SocketUnsafe, match="not a directory of this user"):
        private_dir(tmp_path / "bastion-1" / "abc")


def test_a_peer_of_another_uid_is_refused():
    check_peer(os.getuid())
    check_peer(None)  # a platform that cannot tell: the 0700 directory guards
    with pytest.raises(PeerRefused, match="uid 4242 tried to attach; only uid 1000 may"):
        check_peer(4242, own=1000)


def test_peer_uid_reads_the_other_end_of_a_unix_socket():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_uid(a) == os.getuid()


def test_views_and_events_cross_the_wire_unchanged():
    delta = TextDelta(CONV, "run", 7, 3, "entry", 5, "héllo\u2028")
    joined = TextDeltas(CONV, "run", 7, 3, 5, "entry", 5, "abc")
    for event in (delta, joined):
        assert decode_event(json.loads(json.dumps(encode_event(event)))) == event


async def served(tmp_path, turns, **settings):
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, **settings)
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


async def test_a_client_sees_every_delta_and_the_view_matches_the_driver(tmp_path):
    turn = ScriptedTurn(text="one two three four five six", chunk_size=2, delay=0.01)
    harness, conv = await served(tmp_path, [turn], checkpoint_interval=10.0)
    try:
        client = await AttachClient.connect(socket_path(harness.home, conv.id))
        assert client is not None and client.pid == os.getpid()
        view = client.view
        await harness.submit(conv.id, "count")
        deltas = 0
        while view.active_run is not None or not view.runs:
            batch = await asyncio.wait_for(client.messages(), 5)
            assert batch is not None
            for message in batch:
                event = decode_event(message["event"])
                deltas += isinstance(event, TextDelta | TextDeltas)
                view = reduce(view, event)
            assert not view.resync_required
        # checkpoints every 10 s: what the client saw while streaming came as deltas
        assert deltas >= 2
        assert view.entries[-1].text == "one two three four five six"
        mine, theirs = view_to_wire(view), view_to_wire(await harness.snapshot(conv.id))
        for key in ("version", "entries", "runs", "inbox", "tool_calls"):
            assert mine[key] == theirs[key], key
        await client.close()
    finally:
        await harness.close()


async def test_a_client_that_falls_behind_is_resynced_and_the_harness_never_waits(tmp_path):
    # 2 MB of reasoning fills the socket's buffer; then the deltas waiting are joined,
    # but a checkpoint (a durable event) after every one comes between them: the
    # client's queue grows by two items a delta, past its limit of 8.
    text = "done"
    turn = ScriptedTurn(reasoning="r" * 2_000_000, text=text, chunk_size=2000)
    harness, conv = await served(tmp_path, [turn], checkpoint_interval=0.0)
    server: AttachServer = harness._servers[conv.id]
    server.limit = 8
    # A small read buffer (64 KB), so the unread socket fills; lines (joined deltas are
    # long) are split here, as `read` takes no notice of the buffer's line limit.
    reader, writer = await connect_raw(server.path)
    pending = b""

    async def next_line() -> bytes:
        nonlocal pending
        while b"\n" not in pending:
            pending += await asyncio.wait_for(reader.read(1 << 16), 5)
        raw, pending = pending.split(b"\n", 1)
        return raw

    try:
        hello = json.loads(await next_line())
        # Reading nothing more while the whole answer streams: the harness goes on.
        item = await harness.submit(conv.id, "go")
        run = await asyncio.wait_for(harness.wait(item.id, conv.id), 30)
        assert run.state == "completed"
        view = view_from_wire(hello["view"])
        while view.active_run is not None or not view.runs:
            message = json.loads(await next_line())
            if message["type"] == "snapshot":
                view = view_from_wire(message["view"])
            else:
                view = reduce(view, decode_event(message["event"]))
        assert server.resyncs >= 1
        assert view.entries[-1].text == text
    finally:
        writer.close()
        await harness.close()


async def test_requests_are_applied_by_the_driver_and_refusals_come_back_typed(tmp_path):
    turn = ScriptedTurn(text="slow answer here", chunk_size=1, delay=0.02)
    harness, conv = await served(tmp_path, [turn, ScriptedTurn(text="second")])
    try:
        client = await AttachClient.connect(socket_path(harness.home, conv.id))
        assert client is not None
        await harness.submit(conv.id, "first")
        reply = await client.request("submit", text="and then", mode="follow_up")
        assert reply["item"]["state"] == "queued" and reply["item"]["mode"] == "follow_up"
        with pytest.raises(RemoteError) as refused:
            await client.request("respond", tool_call_id="nope", approve=True)
        assert refused.value.code == "not_pending"
        assert "not waiting for approval" in str(refused.value)
        with pytest.raises(RemoteError, match="unknown request 'dance'"):
            await client.request("dance")
        await asyncio.wait_for(harness.wait_idle(conv.id, poll=0.05), 10)
        snap = await harness.snapshot(conv.id)
        assert [e.text for e in snap.entries] == ["first", "slow answer here", "and then", "second"]
        await client.close()
    finally:
        await harness.close()


async def test_a_follower_falls_back_to_the_ledger_and_acts_on_the_store(tmp_path):
    harness, conv = await served(tmp_path, [ScriptedTurn(text="hi")])
    other = await open_harness(tmp_path, ScriptedProvider())
    follower = Follower(other, conv.id, poll=0.02)
    views = follower.views()
    try:
        await anext(views)
        await anext(views)
        assert follower.source == "socket"
        await harness.release(conv.id)  # the driver goes: its socket with it
        while follower.source != "ledger":
            await asyncio.wait_for(anext(views), 5)
        item = await follower.submit("queued while no one drives", InboxMode.PROMPT)
        assert item.run_id is not None  # admitted into a run any next driver takes up
        while not any(e.text == "queued while no one drives" for e in follower.view.entries):
            await asyncio.wait_for(anext(views), 5)
        await harness.drive(conv.id)  # a driver serves again: picked up
        while follower.source != "socket":
            await asyncio.wait_for(anext(views), 5)
        while not any(e.text == "hi" for e in follower.view.entries):
            await asyncio.wait_for(anext(views), 5)
    finally:
        await views.aclose()
        await other.close()
        await harness.close()


async def test_a_bad_request_line_gets_one_clear_refusal(tmp_path):
    harness, conv = await served(tmp_path, [])
    reader, writer = await connect_raw(socket_path(harness.home, conv.id))
    try:
        await reader.readline()
        writer.write(b"not json\n")
        reply = json.loads(await reader.readline())
        assert reply["ok"] is False and reply["error"]["code"] == "bad_request"
        assert "JSON object" in reply["error"]["message"]
    finally:
        writer.close()
        await harness.close()


def test_remote_errors_are_bastion_errors():
    assert issubclass(RemoteError, BastionError)


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
        assert reply["ok"] is False and reply["error"]["code"] == "peer_refused"
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
        item = await harness.submit(conv.id, "go")
        run = await asyncio.wait_for(harness.wait(item.id, conv.id), 60)
        assert run.state == "completed"  # the run did not wait for the reader either
        await asyncio.wait_for(harness.close(), 30)  # its socket buffer is full, unread
        assert not socket_path(harness.home, conv.id).exists()
    finally:
        writer.close()
