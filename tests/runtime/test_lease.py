"""One driver per conversation: a live holder refuses, a dead one is taken over,
and the dead owner's late writes are refused by the fencing token."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from runtime.errors import ConversationBusy, LeaseLost
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness


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
    await a.drive(conv.id)
    await raw_write(
        a,
        "UPDATE conversations SET lease_heartbeat = lease_heartbeat - 3600, lease_host = 'elsewhere' "
        "WHERE id = ?",
        (conv.id,),
    )
    b = await open_harness(tmp_path, ScriptedProvider())
    await b.drive(conv.id)
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
    await asyncio.sleep(0.5)
    assert isinstance(driver.failure, LeaseLost)
    await a.close()
