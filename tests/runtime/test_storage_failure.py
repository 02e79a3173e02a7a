"""Issue 37 item 11, seed 004: "A storage error ends the Harness … Everything after it,
and every pending wait, rejects with `SessionFailed` … `harness.closed` settles".

A store fault is injected through runtime.store.failpoints (the same switch as
`BASTION_FAILPOINT=store.full:N` in a real process): from the armed write on, every
write fails inside its transaction with SQLite's own error, as a disk that stays full
would. What must hold: one typed `SessionFailed` event, no write after it, the wait and
every later op refused with `SessionFailedError` (over the protocol too), the harness
closed by itself with no task left behind, and everything committed before it kept
and resumable by the next process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runtime import ConversationBusy, Harness
from runtime.ipc.local import local_client
from runtime.model.errors import SessionFailedError
from runtime.model.events import SessionFailed
from runtime.run.deps import LoopSettings
from runtime.store import failpoints
from runtime.store.database import Store
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import open_harness, streaming_text, until_stored

ANSWER = "".join(f"{i:04d} " for i in range(400))  # 2,000 characters, 5 a chunk


@pytest.fixture(autouse=True)
def disarmed():
    yield
    failpoints.arm(None)


async def streaming(tmp_path: Path) -> tuple[Harness, str, str]:
    """A harness streaming a slow answer, some of it already checkpointed: (harness,
    conversation id, inbox item id)."""
    provider = ScriptedProvider([ScriptedTurn(text=ANSWER, chunk_size=5, delay=0.005)])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "count")
    await until_stored(
        harness.store, conv.id, lambda s: len(streaming_text(s)) > 50, "some text checkpointed"
    )
    return harness, conv.id, item.id


async def ledger_length(path: Path, conversation_id: str) -> int:
    other = await Store.open(path)  # (another connection, as another process has)
    try:
        return len(await other.ledger(conversation_id))
    finally:
        await other.close()


@pytest.mark.parametrize(
    ("fault", "reason", "words"),
    [
        ("store.full", "store_full", "is full"),
        ("store.ioerr", "store_io", "failed to read or write"),
        ("store.locked", "store_locked", "locked"),
        ("store.corrupt", "store_corrupt", "corrupt"),
    ],
)
async def test_a_storage_error_ends_the_harness_with_session_failed(
    tmp_path: Path, fault: str, reason: str, words: str
) -> None:
    harness, conv_id, item_id = await streaming(tmp_path)
    events = harness.subscribe(conv_id)
    waiting = asyncio.ensure_future(harness.wait(item_id, conv_id))
    failpoints.arm(f"{fault}:1")  # every write from the next one on fails
    failed = [e async for e in events if isinstance(e, SessionFailed)]  # (ends at close)
    assert len(failed) == 1, failed
    (event,) = failed
    assert event.reason == reason and words in event.message, event
    assert "\n" not in event.message and event.hint  # one line, and what to do next
    kept = await ledger_length(tmp_path / "bastion.sqlite", conv_id)

    with pytest.raises(SessionFailedError) as raised:  # the pending wait
        await asyncio.wait_for(waiting, 10)
    assert raised.value.reason == reason
    await asyncio.wait_for(harness.wait_closed(), 10)  # closed by itself
    with pytest.raises(SessionFailedError):  # every op after it, at once
        await asyncio.wait_for(harness.submit(conv_id, "more"), 5)
    with pytest.raises(SessionFailedError):
        await asyncio.wait_for(harness.snapshot(conv_id), 5)
    assert (await asyncio.wait_for(harness.close(), 10)).remaining == ()  # returns at once
    me = asyncio.current_task()
    assert [t for t in asyncio.all_tasks() if t is not me and not t.done()] == []
    failpoints.arm(None)
    assert await ledger_length(tmp_path / "bastion.sqlite", conv_id) == kept  # no write after


async def test_what_was_committed_before_it_resumes_in_the_next_harness(tmp_path: Path) -> None:
    harness, conv_id, item_id = await streaming(tmp_path)
    failpoints.arm("store.full:1")
    with pytest.raises(SessionFailedError):
        await asyncio.wait_for(harness.wait(item_id, conv_id), 10)
    await asyncio.wait_for(harness.wait_closed(), 10)
    failpoints.arm(None)  # space is back

    provider = ScriptedProvider([ScriptedTurn(text="The rest.")])
    again = await Harness.open(
        tmp_path / "bastion.sqlite",
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        loop_settings=LoopSettings(checkpoint_interval=0.02),
        lease_ttl=0.3,
    )
    try:
        snap = await again.store.snapshot(conv_id)
        (cut,) = [e for e in snap.entries if e.kind == "assistant"]
        assert cut.text and ANSWER.startswith(cut.text)  # what was saved, never changed
        # The failed harness left its lease (nothing more was written): in another
        # process its pid is gone; here, in the same one, it expires with its heartbeat.
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            try:
                await again.drive(conv_id)
                break
            except ConversationBusy:
                assert asyncio.get_running_loop().time() < deadline, "the lease never expired"
                await asyncio.sleep(0.05)  # (poll interval: the lease's ttl runs out)
        run = await asyncio.wait_for(again.wait(item_id, conv_id), 30)
        assert run.state == "completed"
        final = await again.snapshot(conv_id)
        assert [e.text for e in final.entries if e.kind == "user"] == ["count"]
        assert final.entries[-1].text == "The rest."
    finally:
        await again.close()


async def test_over_the_protocol_every_op_after_it_gets_the_typed_error(tmp_path: Path) -> None:
    harness, conv_id, item_id = await streaming(tmp_path)
    client = await local_client(harness, client="test")
    try:
        channel = client.subscribe(conv_id)
        await client.ping()  # (the subscription is taken)
        failpoints.arm("store.ioerr:1")
        seen: list[object] = []
        while (batch := await asyncio.wait_for(channel.get(), 10)) is not None:
            seen.extend(e for e in batch if isinstance(e, SessionFailed))  # type: ignore[union-attr]
        assert len(seen) == 1 and client.failed is not None
        assert client.failed.reason == "store_io"
        ops = (client.wait(item_id, conv_id), client.submit(conv_id, "again"), client.ping())
        for op in ops:  # (a ping too: whatever the op, it is told)
            with pytest.raises(SessionFailedError) as raised:
                await asyncio.wait_for(op, 10)
            assert "failed to read or write" in raised.value.message
    finally:
        report = await asyncio.wait_for(client.close(), 10)
    assert report is not None and report.remaining == ()


async def test_the_op_that_meets_it_gets_the_stores_error_and_every_later_one_session_failed(
    tmp_path: Path,
) -> None:
    """Seed 004: "The call that hit it rejects with the error. Everything after it …
    rejects with `SessionFailed` (its `cause` is that error)": an idle session whose
    submit meets a full disk gets StoreFull; nothing was admitted, and the harness is
    closed for every op after it."""
    from runtime.model.errors import StoreFull

    provider = ScriptedProvider([ScriptedTurn(text="never")])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    kept = await ledger_length(tmp_path / "bastion.sqlite", conv.id)
    failpoints.arm("store.full:1")
    with pytest.raises(StoreFull, match="is full"):
        await harness.submit(conv.id, "hello")
    await asyncio.wait_for(harness.wait_closed(), 10)
    with pytest.raises(SessionFailedError) as raised:
        await harness.submit(conv.id, "hello")
    assert raised.value.reason == "store_full" and provider.requests == []
    failpoints.arm(None)
    assert await ledger_length(tmp_path / "bastion.sqlite", conv.id) == kept
