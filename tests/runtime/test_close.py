"""Issue 37 item 11 (seed 000's two-phase close: `{settled, timedOut, remaining}`):
closing asks every driver to settle and gives them a bound; one that does not settle
in time (a tool effect that will not stop) is abandoned and named, the close itself
never hangs on it, and the session resumes once its lease has expired."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from runtime import CloseReport, ConversationBusy, Harness
from runtime.model.llm import ToolCall
from runtime.model.records import RunState
from runtime.run.deps import LoopSettings
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox

READ = ToolCall("c1", "read_file", json.dumps({"path": "a"}))


class Stubborn(RecordingToolbox):
    """A tool effect that will not stop: it takes no cancellation for `seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self.started = asyncio.Event()

    async def run(self, name: str, arguments: str, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        stubborn = asyncio.ensure_future(asyncio.sleep(self.seconds))  # the effect's work
        while not stubborn.done():
            try:
                await asyncio.shield(stubborn)
            except asyncio.CancelledError:
                continue  # (what a wedged effect does: it goes on regardless)
        return await super().run(name, arguments, *args, **kwargs)


async def opened(tmp_path: Path, provider: Any, toolbox: Any) -> Harness:
    return await Harness.open(
        tmp_path / "b.sqlite",
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: toolbox,
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
        lease_ttl=1.0,
    )


async def test_a_quiet_close_reports_every_session_settled(tmp_path: Path) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="hi")])
    harness = await opened(tmp_path, provider, RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "hello")
    await harness.wait(item.id, conv.id)
    report = await harness.close()
    assert report == CloseReport(settled=(conv.id,), remaining=(), grace=report.grace)
    assert not report.timed_out and report.line() is None
    assert await harness.close() == CloseReport(grace=report.grace)  # closed once


async def test_a_driver_that_does_not_settle_is_abandoned_named_and_resumed_later(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([ScriptedTurn(text="Reading.", tool_calls=(READ,))])
    stubborn = Stubborn(seconds=30.0)
    harness = await opened(tmp_path, provider, stubborn)
    conv = await harness.create_conversation(
        str(tmp_path), settings={"model": "s/m", "approval_mode": "full-auto"}
    )
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "read it")
    await asyncio.wait_for(stubborn.started.wait(), 30)
    loop = asyncio.get_running_loop()
    began = loop.time()
    report = await harness.close(grace=0.3)
    took = loop.time() - began
    assert report.remaining == (conv.id,) and report.settled == () and report.timed_out
    assert took < 10  # bounded: the wedged effect did not hold the close (30 s)
    line = report.line()
    assert line is not None and conv.id[-8:] in line and "bastion -r" in line
    # Resumable: once the abandoned lease expires (1 s here) another harness drives it.
    provider2 = ScriptedProvider([ScriptedTurn(text="Read it.")])
    again = await opened(tmp_path, provider2, RecordingToolbox())
    try:
        deadline = loop.time() + 20
        while True:
            try:
                await again.drive(conv.id)
                break
            except ConversationBusy:  # the lease has not expired yet
                assert loop.time() < deadline, "the abandoned lease never expired"
                await asyncio.sleep(0.1)  # (poll interval)
        run = await again.wait(item.id, conv.id)
        assert run.state == RunState.COMPLETED, run.error
    finally:
        await again.close()


async def test_the_owner_gets_the_report_through_the_protocol(tmp_path: Path) -> None:
    from runtime import local_client

    provider = ScriptedProvider([ScriptedTurn(text="hi")])
    harness = await opened(tmp_path, provider, RecordingToolbox())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    client = await local_client(harness, client="test")
    report = await client.close()
    assert report is not None and report.settled == (conv.id,) and not report.remaining
