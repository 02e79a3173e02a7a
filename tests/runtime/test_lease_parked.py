"""The parked lease (runtime.run.driver: PARKED; runtime.harness.parking): an idle
harness hands its conversation's lease to the app's process; on this host it is held
while that process lives, whatever its heartbeat's age, and free once it is gone; on
another host it expires by heartbeat age like any lease. Only the driver given its
owner id takes it back before that, by compare-and-set on the token. Parking is
refused, with nothing changed, while there is work."""

from __future__ import annotations

import os
import time

import pytest

from runtime.model.errors import ConversationBusy, LeaseLost, NotIdle
from runtime.run.driver import HOST, PARKED, lease_expired
from runtime.store.values import LeaseInfo
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness
from tests.runtime.test_lease import dead_pid

pytestmark = pytest.mark.usefixtures("store_kind")


def _parked(pid: int, host: str, age: float) -> LeaseInfo:
    from runtime.model.ids import uuid7

    now = time.time()
    return LeaseInfo(PARKED + uuid7(), pid, host, now - age, 7, now)


def test_a_parked_lease_on_this_host_is_held_while_its_process_lives():
    assert not lease_expired(_parked(os.getpid(), HOST, age=3600), ttl=15, now=time.time())
    assert lease_expired(_parked(dead_pid(), HOST, age=0), ttl=15, now=time.time())


def test_a_parked_lease_of_another_host_expires_by_its_heartbeat():
    assert not lease_expired(_parked(os.getpid(), "elsewhere", age=1), ttl=15, now=time.time())
    assert lease_expired(_parked(os.getpid(), "elsewhere", age=60), ttl=15, now=time.time())


async def test_park_hands_the_lease_over_and_only_its_owner_takes_it_back(tmp_path):
    a = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="x")]))
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    driver = await a.drive(conv.id)
    item = await a.submit(conv.id, "hi")
    await a.wait(item.id, conv.id)
    parked = await a.park(conv.id, os.getpid())
    assert parked.token == driver.token + 1 and parked.owner.startswith(PARKED)
    lease = await a.store.lease(conv.id)
    assert (lease.owner, lease.pid, lease.token) == (parked.owner, os.getpid(), parked.token)
    with pytest.raises(LeaseLost):  # the old driver's late writes are fenced off
        await a.store.transact(
            conv.id, lambda tx: tx.append_chunk("nope", "text", 0, "late"), token=driver.token
        )
    await a.close()  # (nothing to release: the lease is the parked process's)
    assert (await open_store_lease(tmp_path, conv.id)).owner == parked.owner
    other = await open_harness(tmp_path, ScriptedProvider())
    with pytest.raises(ConversationBusy):
        await other.drive(conv.id)
    await other.close()
    woken = await open_harness(tmp_path, ScriptedProvider([ScriptedTurn(text="again")]))
    woken.parked = parked.owner
    taken = await woken.drive(conv.id)
    assert taken is not None and taken.token == parked.token + 1
    item = await woken.submit(conv.id, "more")
    assert (await woken.wait(item.id, conv.id)).state == "completed"
    await woken.close()


async def open_store_lease(tmp_path, conv_id):
    h = await open_harness(tmp_path, ScriptedProvider())
    try:
        return await h.store.lease(conv_id)
    finally:
        await h.close()


async def test_parking_is_refused_with_queued_input_and_nothing_changes(tmp_path):
    from runtime.model.ids import uuid7

    a = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    lease, taken = await a.store.try_acquire_lease(
        conv.id, uuid7(), os.getpid(), HOST, lambda _: True
    )
    assert taken
    await a.submit(conv.id, "hi")  # admitted; no driver here places it: it waits, queued
    before = await a.store.lease(conv.id)
    with pytest.raises(NotIdle):
        await a.store.park_lease(conv.id, lease.token, PARKED + uuid7(), os.getpid(), HOST)
    with pytest.raises(LeaseLost):
        await a.store.park_lease(conv.id, lease.token + 5, PARKED + uuid7(), os.getpid(), HOST)
    after = await a.store.lease(conv.id)
    assert (after.owner, after.token) == (before.owner, before.token)
    await a.close()


async def test_a_harness_with_mcp_servers_does_not_park(tmp_path):
    from runtime.mcp.hub import McpHub

    a = await open_harness(tmp_path, ScriptedProvider())
    conv = await a.create_conversation(str(tmp_path), settings={"model": "s/m"})
    driver = await a.drive(conv.id)
    a.mcp = McpHub([], tmp_path / "mcp")  # (configured: what start_mcp makes)
    with pytest.raises(NotIdle, match="MCP"):
        await a.park(conv.id, os.getpid())
    lease = await a.store.lease(conv.id)
    assert (lease.owner, lease.token) == (a.owner, driver.token)  # nothing changed
    await a.close()
