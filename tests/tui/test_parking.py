"""The app's harness process parks while the session is idle and comes back on the next
call (tui.parking, runtime.ipc.parking): the lease stays held by the app's process
while parked (a second driver meets ConversationBusy), a killed parked app frees it at
once, the attach socket still answers, and work in progress keeps it from parking."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime import NotIdle
from runtime.testing.process import LoopbackThread
from tests.tui.test_child import in_workdir as in_workdir  # (the fixture)
from tests.tui.test_tmux import pytestmark as pytestmark  # e2e, and skipped without tmux
from tui.child import Child
from tui.cli import main_parser
from tui.parking import Parking


async def _answered(harness, conv_id, channel) -> object:
    while True:
        view = await harness.snapshot(conv_id)
        if view.runs and view.runs[-1].terminal:
            return view
        await channel.get()


async def _opened(opts):
    """A harness process as the app starts it, with the app's way of waking it (an
    idle time of an hour: the tests park it themselves)."""
    child = Child.start(opts, check_model=True)
    child.drive()
    harness, conv_id = await child.harness()
    parking = Parking(opts, 3600)
    parking.start(harness, lambda: conv_id)
    parking._task.cancel()
    return child, harness, conv_id, parking


async def test_it_parks_holds_the_lease_and_wakes_for_the_next_prompt(tmp_path, in_workdir):
    script = [{"text": "First answer."}, {"text": "Second answer."}]
    with LoopbackThread.start(script, tmp_path / "s") as server:
        in_workdir(server)
        child, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "one")
            await _answered(harness, conv_id, channel)
            parked = await _parked(harness, conv_id, parking)
            assert child.process.returncode == 0  # (reaped: its process is gone)
            assert parked.pid == os.getpid() and parked.owner.startswith("parked-")
            # a second driver on this host meets the parked lease
            busy = subprocess.run(
                [sys.executable, "-m", "tui.cli", "-p", "hi", "--resume", conv_id],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert busy.returncode != 0 and f"pid {os.getpid()}" in busy.stderr, busy.stderr
            assert not channel._closed  # (kept for the harness woken next)
            await harness.submit(conv_id, "two")  # wakes it first
            view = await _answered(harness, conv_id, channel)
            texts = [e.text for e in view.entries if e.kind == "user"]
            assert texts == ["one", "two"]
            assert view.entries[-1].text == "Second answer."
            assert [r["messages"][-1]["content"] for r in server.requests()][-1] == "two"
        finally:
            parking.stop()
            await harness.close()


async def _until(harness, conv_id, channel, check) -> object:
    while True:
        view = await harness.snapshot(conv_id)
        if check(view):
            return view
        await channel.get()


async def test_a_pending_approval_or_a_running_job_keeps_it_from_parking(tmp_path, in_workdir):
    write = {"id": "c1", "name": "write_file", "arguments": {"path": "n.txt", "content": "x\n"}}
    job = {
        "id": "c2",
        "name": "run_command",
        "arguments": {"command": "sleep 60", "background": True},
    }
    script = [
        {"tool_calls": [write]}, {"text": "Wrote it."},
        {"tool_calls": [job]}, {"text": "It runs."},
    ]  # fmt: skip
    with LoopbackThread.start(script, tmp_path / "s") as server:
        in_workdir(server)
        child, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test", "--approval-mode", "ask"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "write it")
            view = await _until(harness, conv_id, channel, lambda v: any(
                r.state == "awaiting_approval" for r in v.runs
            ))  # fmt: skip
            with pytest.raises(NotIdle, match="work going"):
                await harness.park(conv_id)
            assert child.process.poll() is None and not harness.asleep
            [call] = [c for c in view.tool_calls if c.state == "pending"]
            await harness.respond(conv_id, call.id, True)
            await _answered(harness, conv_id, channel)
            await harness.set_approval_mode(conv_id, "full-auto")
            await harness.submit(conv_id, "start a job")
            await _until(harness, conv_id, channel, lambda v: v.entries[-1].text == "It runs.")
            await _answered(harness, conv_id, channel)
            with pytest.raises(NotIdle, match="background job"):
                await harness.park(conv_id)
            assert child.process.poll() is None
            await harness.stop_job(conv_id, "job_1")
            parked = await harness.park(conv_id)
            assert parked.approval_mode == "full-auto"  # (the process woken keeps it)
            assert parked.model == "openai/test"
            assert child.process.returncode == 0
            settings = await harness.session_settings(conv_id)  # woken for it
            assert (settings.approval_mode, settings.model) == ("full-auto", "openai/test")
        finally:
            parking.stop()
            await harness.close()


async def _parked(harness, conv_id, parking) -> object:
    parked = await harness.park(conv_id)
    parking._keep_door(parked)  # (what the app's idle watch does once it parked)
    return parked


async def test_attach_while_parked_wakes_the_harness_and_follows_the_session(tmp_path, in_workdir):
    from runtime import socket_path
    from tui.attached import connect

    script = [{"text": "First answer."}, {"text": "From the second terminal."}]
    with LoopbackThread.start(script, tmp_path / "s") as server:
        home = in_workdir(server).parent / "home"
        _, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "one")
            await _answered(harness, conv_id, channel)
            await _parked(harness, conv_id, parking)
            assert socket_path(home, conv_id).exists() and harness.asleep
            reached = await connect(conv_id, home)
            guest, where = reached.client, reached.source  # the app's door: the harness wakes
            try:
                assert where == "live" and guest.guest
                assert guest.server_pid not in (None, os.getpid())
                await harness.wake()  # (under way: the app's own connection comes next)
                assert not harness.asleep  # woken for it, with the parked lease taken back
                await guest.submit(conv_id, "two")
                view = await _answered(harness, conv_id, channel)
                assert view.entries[-1].text == "From the second terminal."
                with pytest.raises(NotIdle, match="attached"):
                    await harness.park(conv_id)
            finally:
                await guest.close()
        finally:
            parking.stop()
            await harness.close()
        assert not socket_path(home, conv_id).exists()


async def test_a_connection_without_the_token_changes_nothing_stored(tmp_path, in_workdir):
    """What a process that cannot read the token (a sandboxed command: the sandbox hides
    bastion's home) can do with the parked app's socket: wake the harness, which refuses
    it as it refuses any; the app never answers on it itself."""
    from runtime import Connection, HarnessClient, PeerRefused, socket_path

    with LoopbackThread.start([{"text": "First answer."}], tmp_path / "s") as server:
        home = in_workdir(server).parent / "home"
        _, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "one")
            await _answered(harness, conv_id, channel)
            await _parked(harness, conv_id, parking)
            before = await _stored(home, conv_id)
            for token in (None, "0" * 64):
                conn = await Connection.unix(str(socket_path(home, conv_id)))
                with pytest.raises(PeerRefused, match="token"):
                    await HarnessClient.connect(conn, client="attach", token=token)
            assert await _stored(home, conv_id) == before  # nothing of the session changed
        finally:
            parking.stop()
            await harness.close()


async def _stored(home, conv_id) -> tuple[object, ...]:
    """The conversation's entries, inbox and runs as stored."""
    import sqlite3

    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        return tuple(
            db.execute(sql, (conv_id,)).fetchall()
            for sql in (
                "SELECT id, kind, status, text FROM entries WHERE conversation_id = ?",
                "SELECT id, state FROM inbox WHERE conversation_id = ?",
                "SELECT id, state FROM runs WHERE conversation_id = ?",
            )
        )
    finally:
        db.close()


async def test_the_idle_watch_parks_after_idle_park_but_not_while_a_command_runs(
    tmp_path, in_workdir
):
    import asyncio

    from runtime.testing.waiting import until

    with LoopbackThread.start([{"text": "First answer."}], tmp_path / "s") as server:
        in_workdir(server)
        opts = main_parser().parse_args(["--model", "openai/test"])
        child = Child.start(opts, check_model=True)
        child.drive()
        harness, conv_id = await child.harness()
        parking = Parking(opts, 0.2)
        said: list[bool] = []
        parking.on_change = said.append
        parking.start(harness, lambda: conv_id)
        try:
            channel = harness.subscribe(conv_id)
            with parking.holding():  # (a slash command under way)
                await harness.submit(conv_id, "one")
                await _answered(harness, conv_id, channel)
                # Longer than idle_park, on purpose: nothing may park meanwhile.
                await asyncio.sleep(1.0)
                assert not harness.asleep and child.process.poll() is None
            await until(lambda: harness.parked is not None, "it to park")
            assert child.process.poll() == 0 and said == [True] and parking.parks == 1
            parking.wake_soon()  # (the first key typed)
            await until(lambda: not harness.asleep, "it to wake")
            assert said == [True, False] and parking.woke_in is not None
        finally:
            parking.stop()
            await harness.close()


async def test_a_wake_that_finds_the_lease_taken_ends_the_client_with_the_reason(
    tmp_path, in_workdir
):
    """Another host's driver may take a parked lease once its heartbeat is old: the
    harness woken then cannot drive, and the app hears why (its follower ends it)."""
    import sqlite3
    import time

    from runtime import HarnessGone
    from runtime.model.ids import uuid7

    with LoopbackThread.start([{"text": "First answer."}], tmp_path / "s") as server:
        home = in_workdir(server).parent / "home"
        _, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.submit(conv_id, "one")
            await _answered(harness, conv_id, channel)
            await _parked(harness, conv_id, parking)
            with sqlite3.connect(home / "bastion.sqlite") as db:  # (what that host did)
                db.execute(
                    "UPDATE conversations SET lease_owner = ?, lease_pid = 4242, "
                    "lease_host = 'elsewhere', lease_heartbeat = ?, "
                    "lease_token = lease_token + 1 WHERE id = ?",
                    (uuid7(), time.time(), conv_id),
                )
            with pytest.raises(HarnessGone, match="elsewhere"):
                await harness.submit(conv_id, "two")
            assert harness.gone is not None
            while await channel.get() is not None:  # what it held, then closed: the app's
                pass  # follower ends on that and says why
            assert [e.text for e in (await _entries(home, conv_id))] == ["one", "First answer."]
        finally:
            parking.stop()
            await harness.close()


async def _entries(home, conv_id):
    from types import SimpleNamespace

    rows = (await _stored(home, conv_id))[0]
    return [SimpleNamespace(text=text) for _, _, _, text in rows]


async def test_a_new_session_with_nothing_sent_parks_and_keeps_its_id(tmp_path, in_workdir):
    with LoopbackThread.start([{"text": "First answer."}], tmp_path / "s") as server:
        home = in_workdir(server).parent / "home"
        child, harness, conv_id, parking = await _opened(
            main_parser().parse_args(["--model", "openai/test", "--approval-mode", "auto-edit"])
        )
        try:
            channel = harness.subscribe(conv_id)
            await harness.snapshot(conv_id)  # (the subscription's reply in: no call waits)
            parked = await _parked(harness, conv_id, parking)
            assert parked.owner == "" and child.process.returncode == 0  # no lease: none held
            assert (parked.approval_mode, parked.model) == ("auto-edit", "openai/test")
            await harness.submit(conv_id, "one")  # woken: prepared anew with its id
            view = await _answered(harness, conv_id, channel)
            assert view.conversation.id == conv_id and view.entries[-1].text == "First answer."
            assert (await harness.session_settings(conv_id)).approval_mode == "auto-edit"
            assert [e.text for e in await _entries(home, conv_id)] == ["one", "First answer."]
        finally:
            parking.stop()
            await harness.close()
