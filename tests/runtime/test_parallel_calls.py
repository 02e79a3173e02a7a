"""Parallel tool calls (runtime.schedule): neighbouring reads of one turn overlap,
a write keeps its place in the asked order, and the model gets the results in the
order it asked them, whatever order they finished in."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.model.llm import ToolCall
from runtime.model.records import Approval, ToolCallRecord, ToolCallState
from runtime.model.tools import ToolInfo, ToolOutcome
from runtime.run.toolbox import WorkspaceToolbox
from runtime.schedule import groups, may_overlap, run_together
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.waiting import until
from tests.runtime.helpers import open_harness

pytestmark = pytest.mark.usefixtures("store_kind")


@dataclass
class ObservedToolbox:
    """The real workspace tools, with every start and end noted. Reads of a path in
    `meet` wait until all of them have started (or `patience` runs out, which they then
    report): reads run one after another never meet, and the test says so."""

    inner: WorkspaceToolbox
    meet: frozenset[str] = frozenset()
    patience: float = 10.0
    log: list[str] = field(default_factory=list)
    arrived: set[str] = field(default_factory=set)
    everyone: asyncio.Event = field(default_factory=asyncio.Event)
    hold: dict[str, asyncio.Event] = field(default_factory=dict)

    def specs(self) -> Any:
        return self.inner.specs()

    def info(self, name: str) -> ToolInfo | None:
        return self.inner.info(name)

    async def run(self, name: str, arguments: str, on_output: Any = None,
                  on_start: Any = None, sandbox: str | None = None) -> ToolOutcome:  # fmt: skip
        path = json.loads(arguments).get("path", "")
        self.log.append(f"start {name} {path}")
        met = ""
        if path in self.meet:
            self.arrived.add(path)
            if self.arrived >= self.meet:
                self.everyone.set()
            try:
                await asyncio.wait_for(self.everyone.wait(), self.patience)
            except TimeoutError:
                met = " (alone)"
        if path in self.hold:
            await self.hold[path].wait()
        outcome = await self.inner.run(name, arguments, on_output, on_start)
        self.log.append(f"end {name} {path}{met}")
        return outcome

    def close(self) -> None:
        self.inner.close()


def read(i: int, path: str) -> ToolCall:
    return ToolCall(f"call_{i}", "read_file", json.dumps({"path": path}))


async def start(tmp_path, turns, toolbox, approval="auto-edit"):
    provider = ScriptedProvider(turns)
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(tmp_path / "ws"), settings={"model": "s/m", "approval_mode": approval}
    )
    await harness.drive(conv.id, interactive=True)
    return harness, conv, provider


def workspace(tmp_path, **files: str) -> WorkspaceToolbox:
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return WorkspaceToolbox(str(root), tmp_path / "artifacts")


async def test_a_write_between_reads_keeps_its_order(tmp_path):
    ws = workspace(tmp_path, **{"a.txt": "alpha\n", "b.txt": "beta\n", "d.txt": "delta\n",
                                "e.txt": "epsilon\n"})  # fmt: skip
    toolbox = ObservedToolbox(ws, meet=frozenset({"a.txt", "b.txt"}))
    write = ToolCall("call_w", "write_file", json.dumps({"path": "c.txt", "content": "sea\n"}))
    calls = (read(1, "a.txt"), read(2, "b.txt"), write, read(3, "c.txt"), read(4, "e.txt"))
    harness, conv, provider = await start(
        tmp_path, [ScriptedTurn(tool_calls=calls), ScriptedTurn(text="done")], toolbox
    )
    item = await harness.submit(conv.id, "look and write")
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    log = toolbox.log
    assert "end read_file a.txt" in log and "end read_file b.txt" in log  # they met
    write_at = log.index("start write_file c.txt")
    assert log.index("end read_file a.txt") < write_at
    assert log.index("end read_file b.txt") < write_at
    written = log.index("end write_file c.txt")
    assert written < log.index("start read_file c.txt")
    assert written < log.index("start read_file e.txt")
    # The read after the write saw what it wrote.
    replies = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in replies] == ["call_1", "call_2", "call_w", "call_3", "call_4"]
    assert "sea" in str(replies[3].content)
    await harness.close()


async def test_results_go_back_in_the_asked_order(tmp_path):
    ws = workspace(tmp_path, **{"a.txt": "alpha\n", "b.txt": "beta\n"})
    toolbox = ObservedToolbox(ws, hold={"a.txt": asyncio.Event()})
    calls = (read(1, "a.txt"), read(2, "b.txt"))
    harness, conv, provider = await start(
        tmp_path, [ScriptedTurn(tool_calls=calls), ScriptedTurn(text="done")], toolbox
    )
    item = await harness.submit(conv.id, "read both")
    await until(lambda: "end read_file b.txt" in toolbox.log, "b to finish while a is held")
    assert "end read_file a.txt" not in toolbox.log
    toolbox.hold["a.txt"].set()
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    assert toolbox.log.index("end read_file b.txt") < toolbox.log.index("end read_file a.txt")
    snap = await harness.store.snapshot(conv.id)
    finished = [e.data["provider_id"] for e in snap.entries if e.kind == "tool_result"]
    assert finished == ["call_2", "call_1"]  # committed as they finished
    replies = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert [m.tool_call_id for m in replies] == ["call_1", "call_2"]  # asked order
    assert "alpha" in str(replies[0].content) and "beta" in str(replies[1].content)
    await harness.close()


async def test_at_most_four_reads_run_at_once():
    running, most = 0, 0

    async def one(call: ToolCallRecord) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)  # (yield to the loop twice: the calls that may run
        await asyncio.sleep(0)  # at once do, and the most running is counted)
        running -= 1

    calls = [_record(i, "read_file") for i in range(9)]
    await run_together(calls, one)
    assert most == 4


async def test_a_failing_call_cancels_its_group_and_waits_for_it():
    finished: list[int] = []
    cancelled: list[int] = []

    async def one(call: ToolCallRecord) -> None:
        if call.index == 0:
            raise OSError("disk gone")
        try:
            await asyncio.sleep(10)  # (the thing under test: a long call, cancelled)
        except asyncio.CancelledError:
            cancelled.append(call.index)
            raise
        finished.append(call.index)

    try:
        await run_together([_record(i, "read_file") for i in range(3)], one)
    except OSError as exc:
        assert str(exc) == "disk gone"
    else:
        raise AssertionError("the failure was lost")
    assert sorted(cancelled) == [1, 2] and finished == []


def test_groups_cut_at_every_call_that_may_not_overlap():
    infos = {"read_file": ToolInfo(True, True), "write_file": ToolInfo(False, False)}
    calls = [_record(0, "read_file"), _record(1, "read_file"), _record(2, "write_file"),
             _record(3, "read_file"), _record(4, "read_file", Approval.PENDING),
             _record(5, "read_file"), _record(6, "read_file")]  # fmt: skip
    cut = groups(calls, lambda c: may_overlap(c, infos.get(c.name)))
    assert [[c.index for c in g] for g in cut] == [[0, 1], [2], [3], [4], [5, 6]]
    assert not may_overlap(_record(0, "unknown"), None)


def _record(index: int, name: str, approval: Approval = Approval.NOT_REQUIRED) -> ToolCallRecord:
    return ToolCallRecord(
        f"k{index}", "c", "r", "e", index, name, "{}", True, approval, ToolCallState.PENDING,
        0.0, 0.0,
    )  # fmt: skip


async def test_a_write_that_asks_holds_the_reads_after_it_until_answered(tmp_path):
    from tests.runtime.helpers import until_awaiting_approval

    ws = workspace(tmp_path, **{"a.txt": "alpha\n", "b.txt": "beta\n", "d.txt": "delta\n"})
    toolbox = ObservedToolbox(ws, meet=frozenset({"a.txt", "b.txt"}))
    write = ToolCall("call_w", "write_file", json.dumps({"path": "c.txt", "content": "sea\n"}))
    calls = (read(1, "a.txt"), read(2, "b.txt"), write, read(3, "d.txt"))
    harness, conv, _ = await start(
        tmp_path, [ScriptedTurn(tool_calls=calls), ScriptedTurn(text="done")], toolbox, "ask"
    )
    item = await harness.submit(conv.id, "look and write")
    snap = await until_awaiting_approval(harness, conv.id)
    # the reads before the write ran (and met), the write asks, the read after waits
    assert sorted(toolbox.log[:2]) == ["start read_file a.txt", "start read_file b.txt"]
    assert sorted(toolbox.log[2:]) == ["end read_file a.txt", "end read_file b.txt"]
    asking = [c for c in snap.tool_calls if c.approval == "pending"]
    assert [c.name for c in asking] == ["write_file"]
    await harness.respond(conv.id, asking[0].id, approve=True)
    run = await harness.wait(item.id, conv.id)
    assert run.state == "completed"
    assert toolbox.log[4:] == ["start write_file c.txt", "end write_file c.txt",
                               "start read_file d.txt", "end read_file d.txt"]  # fmt: skip
    await harness.close()
