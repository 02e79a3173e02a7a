"""Fixtures for the app's tests: a driven harness over a scripted provider, pinned screens."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime import Harness
from runtime.providers.base import ModelRequest, StreamItem, TextChunk
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tui.app import BastionApp

SIZE = (100, 32)  # every snapshot's terminal size
MODEL = "scripted/bastion-test"
SNAPSHOT_ID = "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e"  # the status line shows its tail


class HangingProvider(ScriptedProvider):
    """Streams `text` and then waits forever (until the run is interrupted)."""

    def __init__(self, text: str) -> None:
        super().__init__([ScriptedTurn(text=text)])
        self.text = text
        self.streamed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        yield TextChunk(self.text)
        self.streamed.set()
        await asyncio.Event().wait()


async def open_driven(
    tmp_path: Path,
    provider: ScriptedProvider,
    toolbox: Any = None,
    approval_mode: str = "ask",
    conversation_id: str | None = None,
    cwd: Path | None = None,
) -> tuple[Harness, str]:
    """A harness over `provider`, a new conversation in `cwd` (`tmp_path` unless given),
    driven interactively."""
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(cwd or tmp_path),
        settings={"model": MODEL, "approval_mode": approval_mode},
        conversation_id=conversation_id,
    )
    await harness.drive(conv.id, interactive=True)
    return harness, conv.id


def make_app(
    tmp_path: Path,
    turns: Sequence[ScriptedTurn] | ScriptedProvider,
    *,
    toolbox: Any = None,
    first_prompt: str | None = None,
    theme: str = "bastion-dark",
) -> BastionApp:
    """An app that opens its harness on its own event loop (what snapshot tests need).

    Its conversation's folder is the same path wherever the test runs (the workspace
    root is in the system prompt, whose estimated tokens the status line shows):
    pytest's tmp_path is longer under xdist (`popen-gw0/`) and numbered per run."""
    provider = turns if isinstance(turns, ScriptedProvider) else ScriptedProvider(turns)
    # One folder for every snapshot test (nothing is written there: the store is in
    # tmp_path and the toolboxes are scripted), with the same name each run, since
    # even a random suffix of fixed length tokenizes to a varying count.
    cwd = Path(tempfile.gettempdir()) / "bastion-snapshot"
    cwd.mkdir(exist_ok=True)

    async def opener() -> tuple[Harness, str]:
        return await open_driven(tmp_path, provider, toolbox, conversation_id=SNAPSHOT_ID, cwd=cwd)

    return BastionApp(opener=opener, first_prompt=first_prompt, theme=theme)


async def wait_for(predicate: Callable[[], bool], pilot: Any = None, timeout: float = 30.0) -> None:
    """Poll `predicate` (letting the app work) until it holds; fail after `timeout`.

    The timeout only bounds a failure (a passing test returns as soon as the condition
    holds), so it is generous: on a loaded machine a 3-second scripted stream can take
    well over 5 seconds, and a wait is never a statement about speed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the app")
        if pilot is not None:
            await pilot.pause(0.02)
        else:
            await asyncio.sleep(0.02)


def run_settled(app: BastionApp) -> bool:
    """The view has a run and every run has ended, with nothing queued."""
    view = app.view
    return bool(view and view.runs and view.active_run is None and not view.queued_inbox)


@pytest.fixture
def toolbox() -> RecordingToolbox:
    return RecordingToolbox()


@pytest.fixture(autouse=True)
def _pinned_screen(monkeypatch):
    """Deterministic screens: no cursor blink, a fixed colour depth."""
    from textual.widgets import Input, TextArea

    monkeypatch.setattr(Input, "cursor_blink", False, raising=False)
    monkeypatch.setattr(TextArea, "cursor_blink", False, raising=False)
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    yield
