"""Issue 25, item 13: what the seeds promise (the /restore check is test_restore.py).

- after compaction an interrupted answer reads as cut off to the summariser, as it
  does in the normal request (it used to read as a finished answer);
- a follow-up queued behind a run that fails is held for the user (it used to
  start at once): shown as held in the view, sent by `send_held`, withdrawable;
- an interrupted or failed attempt's spend is recorded per attempt, estimated
  when the provider sent none, and the totals over it say estimated (it used to
  vanish, and the total still read as measured).

Issue 37, item 9 (seeds 000 and 004: spawn, list, wait for, stop a subagent): a
background subagent returns its id at once, is listed, waited for and refused a
second stop (the whole surface: tests/agents/test_background.py and, through real
processes killed and resumed, tests/agents/test_background_crash.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from runtime import Harness, usage_summary
from runtime.context.compaction import CUT_OFF
from runtime.model.errors import InputHeld
from runtime.model.llm import ProviderError
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tests.runtime.test_resume_partial import crashed_mid_answer

pytestmark = pytest.mark.usefixtures("store_kind")

SLOW = "".join(f"{i:03d} " for i in range(300))


async def open_with(tmp_path: Path, main: Any, summariser: Any) -> Harness:
    def resolve(spec: str) -> tuple[Any, str]:
        return (summariser if spec.startswith("sum/") else main), spec.split("/", 1)[1]

    return await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=resolve,
        toolbox_factory=lambda conv: RecordingToolbox(),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=Config(compact_model="sum/small"),
    )


async def interrupted_mid_answer(harness: Harness, conv_id: str, prompt: str) -> str:
    """Submit `prompt`, interrupt once part of the answer is kept; the kept text."""
    item = await harness.submit(conv_id, prompt)
    for _ in range(500):
        snap = await harness.store.snapshot(conv_id)
        texts = [e.text for e in snap.entries if e.kind == "assistant" and e.status == "streaming"]
        if texts and len(texts[-1]) > 20:
            break
        await asyncio.sleep(0.01)  # (poll interval)
    else:
        raise AssertionError("no partial was checkpointed")
    await harness.interrupt(conv_id)
    run = await harness.wait(item.id, conv_id)
    assert run.state == "interrupted"
    snap = await harness.store.snapshot(conv_id)
    return [e for e in snap.entries if e.kind == "assistant"][-1].text


async def test_seed_compaction_summariser_reads_an_interrupted_answer_as_cut_off(
    tmp_path: Path,
) -> None:
    main = ScriptedProvider(
        [ScriptedTurn(text=SLOW, chunk_size=4, delay=0.01), ScriptedTurn(text="Second.")]
    )
    summariser = ScriptedProvider([ScriptedTurn(text="SUMMARY.")])
    harness = await open_with(tmp_path, main, summariser)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id, approval_mode="full-auto")
    partial = await interrupted_mid_answer(harness, conv.id, "count slowly")
    item = await harness.submit(conv.id, "and then?")
    assert (await harness.wait(item.id, conv.id)).state == "completed"
    summary = await harness.compact(conv.id)
    assert summary is not None
    sent = summariser.requests[0].messages[-1].content
    assert isinstance(sent, str)
    assert f"[assistant]\n{partial}\n{CUT_OFF}" in sent
    assert f"[assistant]\nSecond.\n{CUT_OFF}" not in sent  # a finished answer is not marked
    await harness.close()


async def test_seed_follow_up_behind_a_failed_run_is_held_until_sent(tmp_path: Path) -> None:
    broken = ProviderError("bad request", provider="s", status=400)
    provider = ScriptedProvider(
        [ScriptedTurn(error=broken, delay=0.01), ScriptedTurn(text="answered")]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    first = await harness.submit(conv.id, "first")
    follow = await harness.submit(conv.id, "then this", mode="follow_up")
    await harness.drive(conv.id)
    assert (await harness.wait(first.id, conv.id)).state == "failed"
    # held in the failing transaction itself, so nothing could have started it
    view = await harness.snapshot(conv.id)
    assert [i.id for i in view.held_inbox] == [follow.id] and view.queued_inbox == ()
    assert len(provider.requests) == 1
    try:
        await harness.wait(follow.id, conv.id)
    except InputHeld as exc:
        assert "held" in str(exc)
    else:
        raise AssertionError("waiting on a held input should say it is held")

    released = await harness.send_held(conv.id)
    assert [i.id for i in released] == [follow.id]
    assert (await harness.wait(follow.id, conv.id)).state == "completed"
    assert provider.requests[-1].messages[-1].content == "then this"
    assert await harness.send_held(conv.id) == ()
    await harness.close()


async def test_seed_held_input_can_be_withdrawn(tmp_path: Path) -> None:
    broken = ProviderError("bad request", provider="s", status=400)
    provider = ScriptedProvider([ScriptedTurn(error=broken, delay=0.01)])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    first = await harness.submit(conv.id, "first")
    follow = await harness.submit(conv.id, "then this", mode="follow_up")
    await harness.drive(conv.id)
    assert (await harness.wait(first.id, conv.id)).state == "failed"
    assert await harness.withdraw(conv.id, follow.id)
    view = await harness.snapshot(conv.id)
    assert view.held_inbox == () and await harness.send_held(conv.id) == ()
    await harness.close()


async def test_seed_spend_of_a_failed_attempt_without_usage_is_estimated(tmp_path: Path) -> None:
    cut = ProviderError("stream broke", provider="s", status=500, reason="stream broke")
    provider = ScriptedProvider(
        [ScriptedTurn(text=SLOW, chunk_size=40, error=cut, error_after_chunks=5)]
    )
    harness = await open_harness(tmp_path, provider, max_retries=0)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "count")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "failed"
    [attempt] = run.usage["attempts"]
    assert attempt["outcome"] == "failed" and attempt["quality"] == "estimated"
    assert attempt["output_tokens"] > 0 and attempt["input_tokens"] > 0
    assert run.usage["output_tokens"] == attempt["output_tokens"]
    assert run.usage["quality"] == "estimated"
    total = usage_summary(await harness.snapshot(conv.id)).total
    assert total.output_tokens == attempt["output_tokens"] and total.quality == "estimated"
    await harness.close()


async def test_seed_spend_of_a_retried_attempt_counts_in_the_answered_run(tmp_path: Path) -> None:
    cut = ProviderError("overloaded", provider="s", status=503, retryable=True, reason="busy")
    refused = ProviderError("rate limited", provider="s", status=429, retryable=True)
    provider = ScriptedProvider(
        [
            ScriptedTurn(text=SLOW, chunk_size=40, error=cut, error_after_chunks=3),
            ScriptedTurn(error=refused),  # refused before any data: nothing billed
            ScriptedTurn(text="ok"),
        ]
    )
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "count")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    first, second = run.usage["attempts"]
    assert (first["attempt"], first["outcome"], first["quality"]) == (1, "failed", "estimated")
    assert first["output_tokens"] > 0
    assert (second["attempt"], second["output_tokens"], second["quality"]) == (2, 0, "measured")
    # the answer's own usage (10 in, 1 out, from the script) plus the estimated attempt
    assert run.usage["output_tokens"] == 1 + first["output_tokens"]
    assert run.usage["quality"] == "estimated"
    await harness.close()


async def test_seed_spend_of_an_interrupted_attempt_is_recorded(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text=SLOW, chunk_size=4, delay=0.01)])
    harness = await open_harness(tmp_path, provider)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    partial = await interrupted_mid_answer(harness, conv.id, "count slowly")
    [run] = (await harness.snapshot(conv.id)).runs
    [attempt] = run.usage["attempts"]
    assert attempt["outcome"] == "interrupted" and attempt["quality"] == "estimated"
    assert attempt["output_tokens"] >= len(partial) // 8  # about a token per 4 characters
    assert run.usage["output_tokens"] == attempt["output_tokens"]
    total = usage_summary(await harness.snapshot(conv.id)).total
    assert total.output_tokens == attempt["output_tokens"] and total.quality == "estimated"
    await harness.close()


async def test_seed_spend_of_an_attempt_a_crash_cut_off_is_counted_on_resume(
    tmp_path: Path,
) -> None:
    conv_id, item_id = await crashed_mid_answer(tmp_path)
    provider = ScriptedProvider([ScriptedTurn(text="and the rest.")])
    harness = await open_harness(tmp_path, provider)
    await harness.drive(conv_id)
    run = await harness.wait(item_id, conv_id)
    assert run.state == "completed"
    partial = next(e for e in (await harness.snapshot(conv_id)).entries if e.kind == "assistant")
    [attempt] = run.usage["attempts"]
    assert (attempt["outcome"], attempt["quality"]) == ("interrupted", "estimated")
    assert attempt["output_tokens"] == len(partial.text) // 4 + 1 and attempt["cost"] is None
    # the answer's own usage from the script (10 in, 3 out) plus the estimated attempt
    assert run.usage["output_tokens"] == 3 + attempt["output_tokens"]
    assert run.usage["quality"] == "estimated"
    await harness.close()


async def test_seed_persistent_subagent_spawned_listed_waited_for_and_stopped(
    tmp_path: Path,
) -> None:
    import json

    from runtime.testing.server import LoopbackServer
    from tests.agents.helpers import call, start
    from tests.agents.helpers import open_harness as open_loopback

    spawn = {"description": "w", "prompt": "CHILD-W: answer slowly", "background": True}
    turns = [
        {"match": "PARENT", "tool_calls": [call("task", spawn)]},
        {"match": "CHILD-W", "repeat": True, "text": "W-DONE", "chunk_size": 2, "delay_ms": 100},
        {"match": "PARENT", "tool_calls": [call("list_agents", {})]},
        {"match": "PARENT", "tool_calls": [call("wait_agents", {"ids": ["w"], "timeout": 60})]},
        {"match": "PARENT", "tool_calls": [call("stop_agent", {"id": "w"})]},
        {"match": "PARENT", "repeat": True, "text": "done"},
    ]  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    with LoopbackServer(turns) as server:
        harness = await open_loopback(tmp_path, server.base_url)
        try:
            conv, item = await start(harness, work, "PARENT: go")
            await harness.wait(item.id, conv.id)
            snap = await harness.store.snapshot(conv.id)
            spawned, listed, waited, stopped = [
                e.text for e in snap.entries if e.kind == "tool_result"
            ]
            assert spawned.startswith("started background agent")
            assert json.loads(listed)[0]["description"] == "w"
            assert json.loads(waited.partition("\n")[2])[0]["last_words"] == "W-DONE"
            assert stopped.startswith("REFUSED ENDED:")
        finally:
            await harness.close()
