"""A harness over the loopback model server with the real workspace tools, and the
scripted steps of a parent and its subagents (each step keyed by its conversation's
prompt: `match` + `unless`, runtime.testing.server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from runtime import Harness
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.run.toolbox import WorkspaceToolbox
from tests.runtime.helpers import store_location

MODEL = "openai/loopback"


def call(name: str, arguments: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"id": f"call_{index}", "name": name, "arguments": arguments}


def task(prompt: str, description: str = "look around", agent: str | None = None) -> dict:
    args: dict[str, Any] = {"description": description, "prompt": prompt}
    if agent is not None:
        args["agent"] = agent
    return args


async def open_harness(tmp_path: Path, base_url: str) -> Harness:
    provider = OpenAIChatProvider("openai", base_url)
    home = tmp_path / "home"
    return await Harness.open(
        store_location(tmp_path, "home/bastion.sqlite"),
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, home / "artifacts" / conv.id),
        loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
    )


async def start(harness: Harness, cwd: Path, prompt: str, mode: str = "ask", **kw: Any) -> Any:
    conv = await harness.create_conversation(str(cwd), settings={"model": MODEL})
    await harness.drive(conv.id, approval_mode=mode, **kw)
    item = await harness.submit(conv.id, prompt)
    return conv, item


async def until(predicate: Any, what: str, tries: int = 400) -> Any:
    for _ in range(tries):
        found = await predicate()
        if found:
            return found
        await asyncio.sleep(0.02)  # (poll interval)
    raise AssertionError(f"never: {what}")
