"""Compaction: whole turns only, originals kept and marked, the summary under a version
check (a conflict recomputes, a stale summary is never applied), automatic at the
threshold, and a provider's context overflow compacted and retried once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runtime import CompactionFailed, Harness, compacted_through
from runtime.context.compaction import exceeds, plan_compaction
from runtime.harness.transfer import export_document, export_markdown
from runtime.model.llm import ToolCall
from runtime.model.records import Entry, EntryKind, EntryStatus
from runtime.model.views import view_from_snapshot
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer
from runtime.testing.waiting import until
from tests.runtime.helpers import RecordingToolbox


def entry(position: int, kind: str, text: str = "x", run: str = "r", **data: Any) -> Entry:
    return Entry(f"e{position}", "c", position, kind, EntryStatus.COMPLETE, text, 0.0, run, data)


def call_entry(position: int, key: str, run: str = "r") -> Entry:
    calls = [{"key": key, "id": key, "name": "read_file", "arguments": "{}"}]
    return entry(position, EntryKind.ASSISTANT, "", run, tool_calls=calls)


def test_a_cut_never_separates_a_call_from_its_result() -> None:
    words = "word " * 50
    entries = [
        entry(1, EntryKind.USER, words, "r1"),
        call_entry(2, "k1", "r1"),
        # a user entry while k1 has no result yet: no cut may fall here
        entry(3, EntryKind.USER, words, "r1"),
        entry(4, EntryKind.TOOL_RESULT, words, "r1", tool_call_id="k1", name="read_file"),
        entry(5, EntryKind.ASSISTANT, words, "r1"),
        entry(6, EntryKind.USER, words, "r2"),
        entry(7, EntryKind.ASSISTANT, words, "r2"),
    ]
    for keep in (0, 10, 100, 10_000):
        plan = plan_compaction(entries, keep)
        assert plan is not None and plan.through in (5,), (keep, plan)
    only_open = entries[:4]
    assert plan_compaction(only_open, 0) is None


def test_the_run_in_progress_is_never_compacted() -> None:
    entries = [
        entry(1, EntryKind.USER, "a", "r1"),
        entry(2, EntryKind.ASSISTANT, "b", "r1"),
        entry(3, EntryKind.USER, "c", "r2"),
        call_entry(4, "k", "r2"),
        entry(5, EntryKind.TOOL_RESULT, "d", "r2", tool_call_id="k"),
        entry(6, EntryKind.USER, "steer", "r2"),
    ]
    plan = plan_compaction(entries, 0, active_run_id="r2")
    assert plan is not None and plan.through == 2
    assert plan_compaction(entries, 0, active_run_id="r1") is None


def test_the_latest_cut_keeping_enough_is_chosen() -> None:
    big = "word " * 400
    entries = []
    for turn in range(6):
        entries += [
            entry(2 * turn + 1, EntryKind.USER, big, f"r{turn}"),
            entry(2 * turn + 2, EntryKind.ASSISTANT, "ok", f"r{turn}"),
        ]
    plan = plan_compaction(entries, 700)  # two turns of ~400 tokens stay verbatim
    assert plan is not None and plan.through == 8 and plan.kept_tokens >= 700


async def open_with(
    tmp_path: Path, main: Any, config: Config, summariser: Any = None, **loop: Any
) -> Harness:
    def resolve(spec: str) -> tuple[Any, str]:
        provider = summariser if spec.startswith("sum/") else main
        return provider, spec.split("/", 1)[1]

    return await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=resolve,
        toolbox_factory=lambda conv: RecordingToolbox(),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01, **loop),
        config=config,
    )


async def ask(harness: Harness, conv_id: str, text: str) -> Any:
    item = await harness.submit(conv_id, text)
    return await harness.wait(item.id, conv_id)


async def test_manual_compaction_keeps_every_original_and_marks_it(tmp_path: Path) -> None:
    read = ToolCall("c1", "read_file", '{"path": "a"}')
    main = ScriptedProvider(
        [
            ScriptedTurn(text="Looking.", tool_calls=(read,)),
            ScriptedTurn(text="It says hi."),
            ScriptedTurn(text="Second answer."),
            ScriptedTurn(text="Third answer."),
        ]
    )
    summariser = ScriptedProvider([ScriptedTurn(text="SUMMARY: a says hi.")])
    config = Config(compact_model="sum/small")
    harness = await open_with(tmp_path, main, config, summariser)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id, approval_mode="full-auto")
    await ask(harness, conv.id, "what is in a?")
    await ask(harness, conv.id, "and then?")
    before = await harness.snapshot(conv.id)
    summary = await harness.compact(conv.id, "focus on file a")
    assert summary is not None and summary.kind == EntryKind.SUMMARY
    # the summariser read the whole first turn, call and result together, and the focus
    sent = summariser.requests[0].messages[-1].content
    assert isinstance(sent, str)
    assert "what is in a?" in sent and "[tool call read_file]" in sent and "focus on file a" in sent
    kinds = [e.kind for e in before.entries]
    assert kinds == ["user", "assistant", "tool_result", "assistant", "user", "assistant"]
    through = before.entries[3].position  # the first turn, its call and result together
    assert summary.data["through"] == through and summary.data["usage"]["model"] == "sum/small"
    run = await ask(harness, conv.id, "third")
    assert run.state == "completed"
    messages = main.requests[-1].messages
    texts = [m.content for m in messages]
    assert "Summary of the conversation so far:\nSUMMARY: a says hi." in texts
    assert "what is in a?" not in texts and "and then?" in texts and "third" in texts
    after = await harness.snapshot(conv.id)
    await harness.close()
    assert [e.id for e in before.entries] == [e.id for e in after.entries][: len(before.entries)]
    assert compacted_through(after.entries) == through
    view = view_from_snapshot(after)
    exported = export_document(view, [])["entries"]
    assert [e["compacted"] for e in exported[:5]] == [True, True, True, True, False]
    assert "(compacted)" in export_markdown(view)


async def test_nothing_to_compact_returns_none(tmp_path: Path) -> None:
    main = ScriptedProvider([ScriptedTurn(text="only one")])
    harness = await open_with(tmp_path, main, Config())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id)
    await ask(harness, conv.id, "hi")
    assert await harness.compact(conv.id) is None
    await harness.close()


async def test_a_conversation_three_times_the_window_keeps_working(tmp_path: Path) -> None:
    window = 4000  # reserve 1000 (a quarter), budget 3000, ~750 kept verbatim
    config = Config(
        compact_model="sum/small",
        models={"s/tiny": {"context_window": window, "max_output_tokens": 500}},
    )
    runs = 30
    main = ScriptedProvider([ScriptedTurn(text=f"answer {i}") for i in range(runs)])
    summariser = ScriptedProvider([ScriptedTurn(text=f"summary {i}") for i in range(runs)])
    harness = await open_with(tmp_path, main, config, summariser)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/tiny"})
    await harness.drive(conv.id)
    for i in range(runs):
        run = await ask(harness, conv.id, f"prompt {i} " + "word " * 400)
        assert run.state == "completed", run.error
    snap = await harness.snapshot(conv.id)
    await harness.close()
    budget = window - 1000
    assert all(not exceeds(r, budget) for r in main.requests)
    assert all(r.max_tokens == 500 for r in main.requests)
    summaries = [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert len(summaries) >= 3 and all(s.data["reason"] == "auto" for s in summaries)
    assert len([e for e in snap.entries if e.kind == EntryKind.USER]) == runs  # all kept
    # each summary was asked with the one before it
    later = summariser.requests[1].messages[-1].content
    assert isinstance(later, str) and "summary 0" in later


class Bumper:
    """Writes to the conversation while the summariser works (another front end, say):
    once per summary request it sees, `times` times in all."""

    def __init__(self, harness: Harness, conv_id: str, summariser: Any, times: int) -> None:
        self.harness, self.conv_id, self.summariser, self.times = (
            harness, conv_id, summariser, times
        )  # fmt: skip

    async def run(self) -> None:
        for i in range(self.times):
            await until(  # polled often: the write lands while the summary is written
                lambda n=i + 1: len(self.summariser.requests) >= n, "a request", step=0.005
            )
            await self.harness.update_settings(self.conv_id, note=i)


async def two_turns(tmp_path: Path, summaries: list[ScriptedTurn]) -> tuple[Harness, str, Any]:
    main = ScriptedProvider([ScriptedTurn(text="one"), ScriptedTurn(text="two")])
    summariser = ScriptedProvider(summaries)
    harness = await open_with(tmp_path, main, Config(compact_model="sum/small"), summariser)
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/gpt-4o"})
    await harness.drive(conv.id)
    await ask(harness, conv.id, "first")
    await ask(harness, conv.id, "second")
    return harness, conv.id, summariser


async def test_a_conflicting_write_recomputes_the_summary(tmp_path: Path) -> None:
    slow = ScriptedTurn(text="stale summary", chunk_size=1, delay=0.02)
    harness, conv_id, summariser = await two_turns(
        tmp_path, [slow, ScriptedTurn(text="fresh summary")]
    )
    bump = asyncio.create_task(Bumper(harness, conv_id, summariser, 1).run())
    summary = await harness.compact(conv_id)
    await bump
    version = (await harness.get_conversation(conv_id)).version
    snap = await harness.snapshot(conv_id)
    await harness.close()
    assert len(summariser.requests) == 2
    assert summary is not None and summary.text == "fresh summary"
    assert summary.data["base_version"] == version - 1  # the version it was computed at
    assert [e.text for e in snap.entries if e.kind == EntryKind.SUMMARY] == ["fresh summary"]


async def test_a_stale_summary_is_never_applied(tmp_path: Path) -> None:
    slow = [ScriptedTurn(text=f"stale {i}", chunk_size=1, delay=0.03) for i in range(3)]
    harness, conv_id, summariser = await two_turns(tmp_path, slow)
    bump = asyncio.create_task(Bumper(harness, conv_id, summariser, 3).run())
    with pytest.raises(CompactionFailed, match="kept changing"):
        await harness.compact(conv_id)
    await bump
    snap = await harness.snapshot(conv_id)
    await harness.close()
    assert len(summariser.requests) == 3
    assert not [e for e in snap.entries if e.kind == EntryKind.SUMMARY]


OPENAI_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 131000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    },
}


def user_texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_context_overflow_compacts_and_retries_once(tmp_path: Path, wire: str) -> None:
    overflow = OPENAI_OVERFLOW if wire == "openai" else ANTHROPIC_OVERFLOW
    turns = [
        {"text": "first answer"},
        {"text": "second answer"},
        {"fault": {"status": 400, "body": overflow}},
        {"text": "THE SUMMARY"},
        {"text": "third answer"},
        {"fault": {"status": 400, "body": overflow}},
        {"text": "ANOTHER SUMMARY"},
        {"fault": {"status": 400, "body": overflow}},
    ]
    async with LoopbackServer(turns) as server:
        if wire == "openai":
            provider: Any = OpenAIChatProvider("openai", server.base_url)
            spec = "openai/gpt-4o"
        else:
            provider = AnthropicProvider("anthropic", server.url)
            spec = "anthropic/claude-sonnet-4-5"
        harness = await open_with(tmp_path, provider, Config())
        conv = await harness.create_conversation(str(tmp_path), settings={"model": spec})
        await harness.drive(conv.id)
        await ask(harness, conv.id, "FIRST PROMPT")
        await ask(harness, conv.id, "SECOND PROMPT")
        third = await ask(harness, conv.id, "THIRD PROMPT")
        fourth = await ask(harness, conv.id, "FOURTH PROMPT")
        snap = await harness.snapshot(conv.id)
        await harness.close()
        bodies = [r.body for r in server.requests]
    assert third.state == "completed", third.error
    assert "FIRST PROMPT" in user_texts(bodies[2])  # the request that overflowed
    assert "FIRST PROMPT" in user_texts(bodies[3])  # the summariser reads it
    retried = user_texts(bodies[4])
    assert "THE SUMMARY" in retried and "FIRST PROMPT" not in retried
    assert "THIRD PROMPT" in retried
    # a second overflow after compacting fails the run: compaction is tried once per turn
    assert fourth.state == "failed" and fourth.error["code"] in (
        "context_length_exceeded",
        "invalid_request_error",
    )
    assert len(bodies) == 8
    reasons = [e.data["reason"] for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert reasons == ["overflow", "overflow"]
