"""Issue 27 item 13: compaction is shown while it works (events every front end renders),
says afterwards how much it freed, and can be cancelled without ending the run: the run
goes on uncompacted, or fails with one line when the model cannot take it so."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import Harness
from runtime.model.events import CompactionProgress, event_from_dict, event_to_dict
from runtime.model.records import EntryKind
from runtime.model.views import reduce, view_from_snapshot
from runtime.providers.openai import OpenAIChatProvider
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer
from runtime.testing.waiting import until
from tests.runtime.test_compaction import OPENAI_OVERFLOW, ask, open_with

TINY = Config(
    compact_model="sum/small",
    models={"s/tiny": {"context_window": 4000, "max_output_tokens": 500}},
)
PROMPT = "word " * 400


async def ask_watching(
    harness: Harness, conv_id: str, text: str, on_start: Any = None
) -> tuple[Any, list[CompactionProgress]]:
    """Ask, collecting the compaction events; `on_start` runs when one starts."""
    sub = harness.subscribe(conv_id)
    seen: list[CompactionProgress] = []

    async def watch() -> None:
        async for event in sub:
            if isinstance(event, CompactionProgress):
                seen.append(event)
                if event.phase == "started" and on_start is not None:
                    await on_start()

    watcher = asyncio.create_task(watch())
    try:
        run = await ask(harness, conv_id, text)
    finally:
        sub.close()
        await watcher
    return run, seen


async def until_compacting(harness: Harness, conv_id: str, on_start: Any = None) -> tuple:
    for i in range(12):
        run, seen = await ask_watching(harness, conv_id, f"prompt {i} {PROMPT}", on_start)
        if seen:
            return run, seen
    raise AssertionError("no compaction started")


async def test_an_automatic_compaction_is_shown_and_says_what_it_freed(tmp_path: Path) -> None:
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(12)])
    summary = ScriptedTurn(text="S" * 200, chunk_size=10, delay=0.03)  # ~0.6 s of writing
    harness = await open_with(tmp_path, main, TINY, ScriptedProvider([summary]))
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
    await harness.drive(conv.id)
    run, seen = await until_compacting(harness, conv.id)
    snap = await harness.snapshot(conv.id)
    await harness.close()
    assert run.state == "completed"
    phases = [e.phase for e in seen]
    assert phases[0] == "started" and phases[-1] == "done" and "writing" in phases, phases
    started, done = seen[0], seen[-1]
    assert started.entries >= 2 and started.tokens > 400
    writing = [e.written for e in seen if e.phase == "writing"]
    assert writing == sorted(writing) and writing[-1] <= 200
    (summary_entry,) = [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert done.freed == summary_entry.data["freed_tokens"] > 300
    assert all(e.run_id == run.id for e in seen)
    # the events round-trip (stream-json prints them) and the view follows them
    assert event_from_dict(event_to_dict(done)) == done


async def test_cancelling_goes_on_uncompacted_and_compacts_no_more(tmp_path: Path) -> None:
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(12)])
    slow = ScriptedTurn(text="S" * 100, chunk_size=1, delay=0.1)  # 10 s unless cancelled
    summariser = ScriptedProvider([slow, slow])
    harness = await open_with(tmp_path, main, TINY, summariser)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
    await harness.drive(conv.id)
    answers: list[bool] = []

    async def cancel() -> None:
        await until(lambda: summariser.requests, "the summary to be asked for")
        answers.append(await harness.cancel_compaction(conv.id))

    started = asyncio.get_running_loop().time()
    run, seen = await until_compacting(harness, conv.id, cancel)
    took = asyncio.get_running_loop().time() - started
    snap = await harness.snapshot(conv.id)
    assert await harness.cancel_compaction(conv.id) is False  # nothing under way now
    await harness.close()
    assert answers == [True]
    assert run.state == "completed", run.error  # the run went on, not interrupted
    assert [e.phase for e in seen][-1] == "cancelled"
    assert "uncompacted" in seen[-1].message
    assert not [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert len(summariser.requests) == 1  # once cancelled, this run compacts no more
    assert took < 8
    # a view that took the events holds no compaction once it ended
    view = view_from_snapshot(await _reopen(tmp_path, conv.id))
    for event in seen:
        view = reduce(view, event)
    assert not view.compacting


async def _reopen(tmp_path: Path, conv_id: str) -> Any:
    async with await Harness.open(tmp_path / "b.sqlite") as harness:
        return await harness.store.snapshot(conv_id)


async def test_cancelled_and_too_long_for_the_model_fails_with_one_line(tmp_path: Path) -> None:
    turns = [
        {"text": "first answer"},
        {"text": "second answer"},
        {"fault": {"status": 400, "body": OPENAI_OVERFLOW}},
        {"text": "A SLOW SUMMARY " * 20, "chunk_size": 2, "delay_ms": 100},
    ]
    async with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        harness = await open_with(tmp_path, provider, Config())
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "openai/gpt-4o"})
        await harness.drive(conv.id)
        await ask(harness, conv.id, "FIRST PROMPT")
        await ask(harness, conv.id, "SECOND PROMPT")

        async def cancel() -> None:  # once the summary is asked for (the fourth request)
            await until(lambda: len(server.requests) >= 4, "the summary to be asked for")
            assert await harness.cancel_compaction(conv.id)

        third, seen = await ask_watching(harness, conv.id, "THIRD PROMPT", cancel)
        await harness.close()
        requests = len(server.requests)
    assert third.state == "failed"
    message = third.error["message"]
    assert "\n" not in message
    assert "does not fit" in message and "compaction was cancelled" in message
    assert "/new" in message
    assert [e.phase for e in seen] == ["started", "cancelled"] or seen[-1].phase == "cancelled"
    assert requests == 4  # no retry after the cancel: the overflow is the answer


async def test_attach_cancels_through_the_driving_process(tmp_path: Path) -> None:
    """`bastion attach` (the app's Esc there) asks the driver over its socket."""
    from tests.runtime.test_serve import attach

    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(12)])
    slow = ScriptedTurn(text="S" * 100, chunk_size=1, delay=0.1)
    from runtime.ipc.listen import Listeners

    summariser = ScriptedProvider([slow])
    harness = await open_with(tmp_path, main, TINY, summariser)
    harness.serving = Listeners(harness)  # (as every driving process serves its sessions)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
    await harness.drive(conv.id)
    client = await attach(harness, conv.id)
    replies: list[Any] = []

    async def cancel() -> None:
        await until(lambda: summariser.requests, "the summary to be asked for")
        replies.append(await client.cancel_compaction(conv.id))

    try:
        run, seen = await until_compacting(harness, conv.id, cancel)
        replies.append(await client.cancel_compaction(conv.id))
    finally:
        await client.close()
        await harness.close()
    assert replies == [True, False]
    assert run.state == "completed" and seen[-1].phase == "cancelled"
