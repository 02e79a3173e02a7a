"""Shared pieces for runtime tests: a harness over a scripted provider, a fake toolbox."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime import Harness
from runtime.model.llm import ToolSpec
from runtime.model.tools import ToolInfo, ToolOutcome
from runtime.run.deps import LoopSettings
from runtime.store.database import Store
from runtime.testing.scripted import ScriptedProvider
from runtime.testing.waiting import STEP, TIMEOUT


@dataclass
class RecordingToolbox:
    """A toolbox at the runtime's seam: records calls, answers from a table."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    sandboxes: list[str | None] = field(default_factory=list)  # each call's sandbox answer

    def specs(self) -> tuple[ToolSpec, ...]:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return (
            ToolSpec("read_file", "read", schema),
            ToolSpec("write_file", "write", schema),
            ToolSpec("run_command", "run", schema),
        )

    def info(self, name: str) -> ToolInfo | None:
        return {
            "read_file": ToolInfo(True, True),
            "write_file": ToolInfo(False, False),
            "run_command": ToolInfo(False, False),
        }.get(name)

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Any = None,
        on_start: Any = None,
        sandbox: str | None = None,
    ) -> ToolOutcome:
        self.calls.append((name, json.loads(arguments)))
        self.sandboxes.append(sandbox)
        if on_output is not None and name == "run_command":
            on_output("line one\n")
            on_output("line two\n")
        if self.gate is not None:
            await self.gate.wait()
        return ToolOutcome(True, f"{name} ok", {"name": name})

    def close(self) -> None:
        pass


#: The PostgreSQL database a test running on both stores gave its tmp_path (conftest's
#: `store_kind`); a tmp_path not here keeps its store in SQLite's file.
STORES: dict[str, str] = {}


def store_location(tmp_path: Any, name: str = "bastion.sqlite") -> Any:
    """Where a test's harness keeps its store: the test's PostgreSQL database when it runs
    on PostgreSQL, otherwise the SQLite file `name` in `tmp_path`."""
    return STORES.get(str(tmp_path), tmp_path / name)


async def open_harness(
    tmp_path, provider: ScriptedProvider, toolbox: Any = None, **settings: Any
) -> Harness:
    """A harness over `provider`, its store in `tmp_path`; like every driving process
    (tui.session), it serves each conversation it drives on its attach socket."""
    from runtime.ipc.listen import Listeners

    loop = LoopSettings(**({"checkpoint_interval": 0.02, "backoff_base": 0.01} | settings))
    harness = await Harness.open(
        store_location(tmp_path),
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=(lambda conv: toolbox) if toolbox is not None else None,
        loop_settings=loop,
    )
    harness.serving = Listeners(harness)
    return harness


async def until_stored(
    store: Store,
    conversation_id: str,
    predicate: Callable[[Any], object],
    what: str,
    timeout: float = TIMEOUT,
) -> Any:
    """Read the conversation's snapshot from the store until `predicate` holds of it, and
    return it; fail naming `what` after `timeout` seconds (an outer bound for a loaded
    machine: a condition that holds returns at once)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate(snap := await store.snapshot(conversation_id)):
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(STEP)  # (poll interval)
    return snap


def streaming_text(snap: Any) -> str:
    """The text committed so far of the newest answer still streaming ("" if none)."""
    texts = [e.text for e in snap.entries if e.kind == "assistant" and e.status == "streaming"]
    return texts[-1] if texts else ""


async def until_awaiting_approval(harness: Harness, conversation_id: str) -> Any:
    """Wait for the newest run to ask for approval; returns the snapshot."""
    return await until_stored(
        harness.store,
        conversation_id,
        lambda snap: snap.runs and snap.runs[-1].state == "awaiting_approval",
        "the run to ask for approval",
    )
