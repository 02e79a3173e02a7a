"""Issue 37 item 5 (seed 004: "the conversation keeps working while the summary is
made. The summary is placed at once when the conversation is idle, otherwise at the
next turn boundary"): a request past BACKGROUND_AT of the budget starts the summary in
the background; the run sends its requests meanwhile and uses the summary from the
request after it lands. One still being written when the run answers goes on: placed
when it lands, the next run taking it up; one still written when the harness closes
is stopped, nothing of it committed; one that fails is said once and not asked for
again in that run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec

from runtime import Harness
from runtime.context.compaction import exceeds
from runtime.hooks import parse_hooks
from runtime.model.events import CompactionProgress
from runtime.model.llm import ProviderError, ToolCall
from runtime.model.records import EntryKind
from runtime.run.compacting import BACKGROUND_AT
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.hooks.helpers import script
from tests.runtime.helpers import RecordingToolbox

TINY = Config(
    compact_model="sum/small",
    models={"s/tiny": {"context_window": 4000, "max_output_tokens": 500}},
)
SUMMARY = "S" * 200


class Held(RecordingToolbox):
    """Reads a path `wait` only once `landed` is set (the test sets it when it sees the
    summary committed): the run's next request is then sent after it landed."""

    def __init__(self) -> None:
        super().__init__()
        self.landed = asyncio.Event()

    async def run(self, name: str, arguments: str, *args: Any, **kwargs: Any) -> Any:
        if json.loads(arguments).get("path") == "wait":
            await self.landed.wait()
        return await super().run(name, arguments, *args, **kwargs)


async def open_tiny(
    tmp_path: Path, main: Any, summariser: Any, toolbox: Any, config: Config = TINY
) -> Harness:
    def resolve(spec: str) -> tuple[Any, str]:
        return (summariser if spec.startswith("sum/") else main), spec.split("/", 1)[1]

    return await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=resolve,
        toolbox_factory=lambda conv: toolbox,
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        config=config,
    )


async def ask(harness: Harness, conv_id: str, text: str) -> Any:
    item = await harness.submit(conv_id, text)
    return await harness.wait(item.id, conv_id)


async def near_the_window(harness: Harness, conv_id: str, main: ScriptedProvider) -> None:
    """Quick turns until a request passes BACKGROUND_AT of the budget (each run has one
    request: none starts a summary, which only a run's later requests do)."""
    budget = 4000 - 1000  # the window less its reserve (a quarter of a small window)
    for i in range(20):
        main.add(ScriptedTurn(text=f"answer {i}"))
        await ask(harness, conv_id, f"prompt {i} " + "word " * 200)
        if exceeds(main.requests[-1], int(budget * BACKGROUND_AT)):
            assert not exceeds(main.requests[-1], budget)
            return
    raise AssertionError("the conversation never neared the window")


def calls(*paths: str) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(f"c{p}", "read_file", json.dumps({"path": p})) for p in paths)


async def watched(harness: Harness, conv_id: str, text: str) -> tuple[Any, list[Any]]:
    sub = harness.subscribe(conv_id)
    seen: list[CompactionProgress] = []

    async def watch() -> None:
        async for event in sub:
            if isinstance(event, CompactionProgress):
                seen.append(event)

    watcher = asyncio.create_task(watch())
    try:
        run = await ask(harness, conv_id, text)
    finally:
        sub.close()
        await watcher
    return run, seen


async def test_the_run_goes_on_while_the_summary_is_made_and_uses_it_once_landed(
    tmp_path: Path,
) -> None:
    main, toolbox = ScriptedProvider(), Held()
    summariser = ScriptedProvider([ScriptedTurn(text=SUMMARY, chunk_size=20, delay=0.05)])
    harness = await open_tiny(tmp_path, main, summariser, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/tiny", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    await near_the_window(harness, conv.id, main)
    assert summariser.requests == []  # (a run's first request starts no summary)
    before = len(main.requests)
    main.add(
        ScriptedTurn(text="Reading.", tool_calls=calls("a")),
        ScriptedTurn(text="And the other.", tool_calls=calls("wait")),
        ScriptedTurn(text="Done."),
    )
    sent_when_landed: list[int] = []

    async def land() -> None:
        for _ in range(3000):  # (up to a minute on a loaded machine)
            snap = await harness.snapshot(conv.id)
            if any(e.kind == EntryKind.SUMMARY for e in snap.entries):
                sent_when_landed.append(len(main.requests) - before)
                toolbox.landed.set()
                return
            await asyncio.sleep(0.02)  # (poll interval: the store is read, not watched)
        raise AssertionError("the background summary never landed")

    lander = asyncio.create_task(land())
    run, seen = await watched(harness, conv.id, "go")
    await lander
    snap = await harness.snapshot(conv.id)
    await harness.close()
    assert run.state == "completed", run.error
    (summary,) = [e for e in snap.entries if e.kind == EntryKind.SUMMARY]
    assert summary.run_id == run.id and summary.data["reason"] == "background"
    # the run sent its second request without waiting, while the summary was written
    assert sent_when_landed and sent_when_landed[0] >= 2
    requests = main.requests[before:]
    assert len(requests) == 3 and len(summariser.requests) == 1
    texts = [json.dumps([str(m.content) for m in r.messages]) for r in requests]
    assert SUMMARY not in texts[0] and SUMMARY not in texts[1]
    assert SUMMARY in texts[2]  # the request after it landed is built with it
    assert all(e.background for e in seen)
    phases = [e.phase for e in seen]
    assert phases[0] == "started" and phases[-1] == "done", phases
    assert summary.data["usage"]["output_tokens"] > 0  # its spend, kept with it


async def test_a_summary_still_written_when_the_harness_closes_is_stopped_and_not_kept(
    tmp_path: Path,
) -> None:
    main, toolbox = ScriptedProvider(), Held()
    slow = ScriptedTurn(text=SUMMARY, chunk_size=1, delay=0.5)  # 100 s unless stopped
    summariser = ScriptedProvider([slow])
    harness = await open_tiny(tmp_path, main, summariser, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/tiny", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    await near_the_window(harness, conv.id, main)
    main.add(
        ScriptedTurn(text="Reading.", tool_calls=calls("a")),
        ScriptedTurn(text="And the other.", tool_calls=calls("wait")),
        ScriptedTurn(text="Done."),
    )

    async def asked() -> None:  # the run ends only once the summary is being written
        await until(lambda: bool(summariser.requests), "the summary asked for")
        toolbox.landed.set()

    asking = asyncio.create_task(asked())
    run, seen = await watched(harness, conv.id, "go")
    await asking
    snap = await harness.snapshot(conv.id)
    await harness.close()
    assert run.state == "completed", run.error
    assert len(summariser.requests) == 1 and seen and seen[0].background
    assert not [e for e in snap.entries if e.kind == EntryKind.SUMMARY]


async def test_a_failed_background_summary_is_said_once_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    main, toolbox = ScriptedProvider(), Held()
    toolbox.landed.set()
    failing = ScriptedTurn(error=ProviderError("the summary model is down", provider="sum"))
    summariser = ScriptedProvider([failing, failing, failing])
    harness = await open_tiny(tmp_path, main, summariser, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/tiny", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    await near_the_window(harness, conv.id, main)
    main.add(
        ScriptedTurn(text="Reading.", tool_calls=calls("a")),
        ScriptedTurn(text="More.", tool_calls=calls("b")),
        ScriptedTurn(text="And more.", tool_calls=calls("c")),
        ScriptedTurn(text="Done."),
    )
    run, seen = await watched(harness, conv.id, "go")
    await until(lambda: bool(seen) and seen[-1].phase == "failed", "the failure said")
    await harness.close()
    assert run.state == "completed", run.error
    assert [e.phase for e in seen if e.phase != "writing"] == ["started", "failed"]
    assert "the summary model is down" in seen[-1].message
    assert len(summariser.requests) == 1  # not asked again in this run


async def pre_compacted(tmp_path: Path, answer: dict[str, Any]) -> tuple[Any, ScriptedProvider]:
    """A run that nears the window under a PreCompact hook answering `answer`; the run
    ends only once the summary was asked for, if it is."""
    hook = script(tmp_path / "hooks", "pc.sh", f"cat >/dev/null\necho '{json.dumps(answer)}'\n")
    config = msgspec.structs.replace(
        TINY, hooks=parse_hooks({"PreCompact": [{"command": str(hook)}]}, "config.toml")
    )
    main, toolbox = ScriptedProvider(), Held()
    summariser = ScriptedProvider([ScriptedTurn(text=SUMMARY)])
    workspace = tmp_path / "ws"
    workspace.mkdir()
    harness = await open_tiny(tmp_path, main, summariser, toolbox, config)
    conv = await harness.create_conversation(
        str(workspace), settings={"model": "s/tiny", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    await near_the_window(harness, conv.id, main)
    main.add(
        ScriptedTurn(text="Reading.", tool_calls=calls("a")),
        ScriptedTurn(text="And the other.", tool_calls=calls("wait")),
        ScriptedTurn(text="Done."),
    )
    if answer.get("decision") == "block":
        toolbox.landed.set()
    else:
        asking = asyncio.create_task(until(lambda: bool(summariser.requests), "summary asked"))
        asking.add_done_callback(lambda _: toolbox.landed.set())
    run = await ask(harness, conv.id, "go")
    await harness.close()
    assert run.state == "completed", run.error
    return run, summariser


async def test_a_background_summary_asks_the_pre_compact_hooks_first(tmp_path: Path) -> None:
    answer = {"hookSpecificOutput": {"customInstructions": "keep every file name"}}
    _, summariser = await pre_compacted(tmp_path, answer)
    (request,) = summariser.requests
    assert "keep every file name" in str(request.messages[-1].content)


async def test_a_pre_compact_block_stops_the_background_summary(tmp_path: Path) -> None:
    _, summariser = await pre_compacted(tmp_path, {"decision": "block", "reason": "not now"})
    assert summariser.requests == []


class Gated(ScriptedProvider):
    """A summariser that has its request but sends nothing until `gate` is set."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__([ScriptedTurn(text=SUMMARY, chunk_size=20)])
        self.gate = gate

    async def stream(self, request: Any) -> Any:
        async for item in super().stream(request):
            await self.gate.wait()
            yield item


async def _run_ends_while_the_summary_is_written(
    tmp_path: Path, summariser: ScriptedProvider
) -> tuple[Harness, str, ScriptedProvider, ScriptedProvider, Any]:
    main, toolbox = ScriptedProvider(), Held()
    harness = await open_tiny(tmp_path, main, summariser, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/tiny", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    await near_the_window(harness, conv.id, main)
    main.add(
        ScriptedTurn(text="Reading.", tool_calls=calls("a")),
        ScriptedTurn(text="And the other.", tool_calls=calls("wait")),
        ScriptedTurn(text="Done."),
    )
    asking = asyncio.create_task(until(lambda: bool(summariser.requests), "summary asked"))
    asking.add_done_callback(lambda _: toolbox.landed.set())
    run = await ask(harness, conv.id, "go")
    assert run.state == "completed", run.error
    toolbox.landed = asyncio.Event()  # (the next `wait` read waits again)
    return harness, conv.id, main, summariser, (run, toolbox)


async def summaries(harness: Harness, conv_id: str) -> list[Any]:
    snap = await harness.snapshot(conv_id)
    return [e for e in snap.entries if e.kind == EntryKind.SUMMARY]


async def placed(harness: Harness, conv_id: str) -> list[Any]:
    for _ in range(3000):  # (up to a minute on a loaded machine)
        if found := await summaries(harness, conv_id):
            return found
        await asyncio.sleep(0.02)  # (poll interval: the store is read, not watched)
    raise AssertionError("the summary was never placed")


async def test_a_summary_still_written_when_the_run_answers_is_placed_when_it_lands(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    harness, conv_id, main, summariser, (run, _) = await _run_ends_while_the_summary_is_written(
        tmp_path, Gated(gate)
    )
    try:
        assert await summaries(harness, conv_id) == []  # (the run answered before it landed)
        gate.set()
        (summary,) = await placed(harness, conv_id)
        assert summary.run_id == run.id and summary.data["reason"] == "background"
        main.add(ScriptedTurn(text="Next."))
        await ask(harness, conv_id, "next")
        assert SUMMARY in json.dumps([str(m.content) for m in main.requests[-1].messages])
        assert len(summariser.requests) == 1
    finally:
        await harness.close()


async def test_the_next_run_takes_up_a_summary_an_earlier_run_left_writing(
    tmp_path: Path,
) -> None:
    gate = asyncio.Event()
    harness, conv_id, main, summariser, (_, toolbox) = await _run_ends_while_the_summary_is_written(
        tmp_path, Gated(gate)
    )
    try:
        before = len(main.requests)
        main.add(
            ScriptedTurn(text="Reading.", tool_calls=calls("b")),
            ScriptedTurn(text="More.", tool_calls=calls("wait")),
            ScriptedTurn(text="Done again."),
        )
        item = await harness.submit(conv_id, "again")
        await until(lambda: len(main.requests) > before, "the next run's first request")
        gate.set()  # the summary lands while the next run works
        await placed(harness, conv_id)
        toolbox.landed.set()
        run = await harness.wait(item.id, conv_id)
        assert run.state == "completed", run.error
        assert len(await summaries(harness, conv_id)) == 1
        texts = [json.dumps([str(m.content) for m in r.messages]) for r in main.requests[before:]]
        assert SUMMARY in texts[-1]  # used from the request after it landed
        assert len(summariser.requests) == 1  # taken up, not a second summary
    finally:
        await harness.close()
