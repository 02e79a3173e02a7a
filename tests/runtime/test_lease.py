"""One driver per conversation: a live holder refuses, a dead one is taken over,
and the dead owner's late writes are refused by the fencing token."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.model.errors import ConversationBusy, LeaseLost
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_second_driver_is_refused_naming_the_pid(tmp_path):
    a = await open_harness(tmp_path, ScriptedProvider())
    b = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    with pytest.raises(ConversationBusy) as info:
        await b.drive(conv.id)
    import os

    assert info.value.pid == os.getpid() and f"pid {os.getpid()}" in str(info.value)
    await a.close()
    await b.drive(conv.id)  # released on close
    await b.close()


async def raw_write(harness, sql, params):
    """A statement behind the harness's back, as another process's would be."""
    await harness.store._write(lambda db: db.execute(sql, params))


async def test_dead_owner_is_taken_over_and_its_late_writes_refused(tmp_path):
    a = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="x")]))
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    driver = await a.drive(conv.id)
    # Make the lease look like a crashed process's: a pid that no longer exists.
    await raw_write(a, "UPDATE conversations SET lease_pid = ? WHERE id = ?", (dead_pid(), conv.id))
    b = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="from b")]))
    taken = await b.drive(conv.id)
    assert taken.token == driver.token + 1
    with pytest.raises(LeaseLost):
        await a.store.transact(
            conv.id, lambda tx: tx.append_chunk("nope", "text", 0, "late"), token=driver.token
        )
    item = await b.submit(conv.id, "hi")
    assert (await b.wait(item.id, conv.id)).state == "completed"
    await b.close()
    a._drivers.clear()  # a's driver lost its lease; closing must not release b's
    await a.close()


async def test_stale_heartbeat_is_taken_over(tmp_path):
    a = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    driver = await a.drive(conv.id)
    await raw_write(
        a,
        "UPDATE conversations SET lease_heartbeat = lease_heartbeat - 3600, lease_host = 'elsewhere' "
        "WHERE id = ?",
        (conv.id,),
    )
    b = await open_harness(tmp_path, ScriptedProvider())
    taken = await b.drive(conv.id)  # a stale heartbeat: taken over, not refused
    assert taken.token == driver.token + 1
    with pytest.raises(LeaseLost):  # the stale holder's writes are fenced off
        await a.store.transact(
            conv.id, lambda tx: tx.append_chunk("nope", "text", 0, "late"), token=driver.token
        )
    await b.close()
    a._drivers.clear()
    await a.close()


async def test_heartbeat_notices_a_takeover(tmp_path):
    provider = ScriptedProvider()
    a = await open_harness(tmp_path, provider)
    a.lease_ttl = 0.3
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    driver = await a.drive(conv.id)
    await raw_write(
        a, "UPDATE conversations SET lease_token = lease_token + 1 WHERE id = ?", (conv.id,)
    )
    await until(lambda: isinstance(driver.failure, LeaseLost), "the heartbeat to notice")
    await a.close()


# --- issue 25, item 14: a zombie or a reused pid is no driver ----------------------


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet (as a killed app's harness may be)."""
    import time
    from pathlib import Path

    proc = subprocess.Popen(["true"])
    for _ in range(500):
        stat = Path(f"/proc/{proc.pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] == "Z":
            return proc
        time.sleep(0.01)  # (poll interval)
    raise AssertionError("the child never became a zombie")


def _owner_made_at(seconds_ago: float) -> str:
    """A harness owner id (UUIDv7) as if made `seconds_ago`."""
    import time
    import uuid

    from runtime.model.ids import uuid7

    ms = int((time.time() - seconds_ago) * 1000)
    low = uuid.UUID(uuid7()).int & ((1 << 80) - 1)
    return str(uuid.UUID(int=(ms << 80) | low))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_zombie_driver_a_zombie_pid_is_taken_over_at_once(tmp_path):
    a = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    zombie = _zombie()
    try:
        # The lease names a pid that exists, as a zombie, with a fresh heartbeat.
        await raw_write(
            a, "UPDATE conversations SET lease_pid = ? WHERE id = ?", (zombie.pid, conv.id)
        )
        b = await open_harness(tmp_path, ScriptedProvider())
        await b.drive(conv.id)
        await b.close()
    finally:
        zombie.wait()
    a._drivers.clear()
    await a.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_zombie_driver_a_pid_reused_by_a_later_process_is_taken_over(tmp_path):
    import time

    from runtime.run.driver import HOST

    a = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await a.drive(conv.id)
    other = subprocess.Popen(["sleep", "30"])  # alive, and not the lease's owner
    try:
        # The owner id was made an hour ago, so the process now at that pid, started a
        # moment ago, cannot be it: the pid was given to another program.
        await raw_write(
            a,
            "UPDATE conversations SET lease_pid = ?, lease_owner = ? WHERE id = ?",
            (other.pid, _owner_made_at(3600), conv.id),
        )
        b = await open_harness(tmp_path, ScriptedProvider())
        await b.drive(conv.id)
        await b.close()
        # The same live process under an owner id made after it started is a driver.
        await raw_write(
            a,
            "UPDATE conversations SET lease_pid = ?, lease_owner = ?, lease_heartbeat = ?, "
            "lease_host = ? WHERE id = ?",
            (other.pid, _owner_made_at(0), time.time(), HOST, conv.id),
        )
        c = await open_harness(tmp_path, ScriptedProvider())
        with pytest.raises(ConversationBusy):
            await c.drive(conv.id)
        await c.close()
    finally:
        other.kill()
        other.wait()
    a._drivers.clear()
    await a.close()
