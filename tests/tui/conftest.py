"""Fixtures for the app's tests: a driven harness over a scripted provider, pinned screens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime import Harness, HarnessClient
from runtime.ipc.local import local_client
from runtime.model.llm import ModelRequest, StreamItem, TextChunk
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from tests.runtime.helpers import RecordingToolbox, open_harness
from tests.tui.process import harness_process as harness_process  # the fixture
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
    folder: Path | None = None,
) -> tuple[Harness, str]:
    """A harness over `provider` (its store in `tmp_path`), a new conversation in
    `folder` (default `tmp_path`), driven interactively."""
    harness = await open_harness(tmp_path, provider, toolbox)
    conv = await harness.create_conversation(
        str(folder or tmp_path),
        settings={"model": MODEL, "approval_mode": approval_mode},
        conversation_id=conversation_id,
    )
    await harness.drive(conv.id, interactive=True)
    return harness, conv.id


async def client_of(harness: Harness) -> HarnessClient:
    """A client of `harness` over the protocol's transport (served on the test's loop
    until the harness closes; the test keeps the harness)."""
    return await local_client(harness, client="test", owner=False)


def app_over(harness: Harness, conversation_id: str, **options: Any) -> BastionApp:
    """The app as it ships, over the protocol's transport to `harness` (JSON lines on
    a socket pair, served on the test's loop: the test keeps the harness to look at
    its store and closes it itself)."""

    async def opener() -> tuple[HarnessClient, str]:
        return await local_client(harness, client="test", owner=False), conversation_id

    return BastionApp(opener=opener, **options)


def attached_app(harness: Harness, conversation_id: str, **options: Any) -> BastionApp:
    """The app as `bastion attach ID` opens it: a client on the session's attach
    socket, which `harness` (the driving process's) serves."""
    from tui.attach_app import opener

    said: list[str] = []
    return BastionApp(opener=opener(conversation_id, said, harness.home), notes=said, **options)


def notices(app: Any) -> str:
    """What the app's notifications said, joined."""
    return " | ".join(str(n.message) for n in app._notifications)


def snapshot_folder() -> Path:
    """The workspace of every snapshot's conversation: one path, whatever `tmp_path` is
    (under xdist it gains `popen-gwN/`), since the workspace root is in the system
    prompt and so in the status line's token estimate."""
    folder = Path("/tmp") / "bastion-snapshot-workspace"  # not $TMPDIR, which varies
    folder.mkdir(exist_ok=True)
    return folder


def make_app(
    tmp_path: Path,
    turns: Sequence[ScriptedTurn] | ScriptedProvider,
    *,
    toolbox: Any = None,
    first_prompt: str | None = None,
    theme: str = "bastion-dark",
) -> BastionApp:
    """An app that opens its harness on its own event loop (what snapshot tests need),
    its conversation in `snapshot_folder()`."""
    provider = turns if isinstance(turns, ScriptedProvider) else ScriptedProvider(turns)

    async def opener() -> tuple[HarnessClient, str]:
        harness, conv_id = await open_driven(
            tmp_path, provider, toolbox, conversation_id=SNAPSHOT_ID, folder=snapshot_folder()
        )
        return await local_client(harness, client="test"), conv_id

    return BastionApp(opener=opener, first_prompt=first_prompt, theme=theme)


async def wait_for(predicate: Callable[[], bool], pilot: Any = None, timeout: float = 30.0) -> None:
    """Poll `predicate` (letting the app work) until it holds; fail after `timeout`.

    The timeout is an outer bound for a loaded machine (the suite runs four workers on
    two cores), not a measure of speed: a passing test returns as soon as it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the app")
        if pilot is not None:
            await pilot.pause(0.02)
        else:
            await asyncio.sleep(0.02)  # (poll interval)


def run_settled(app: BastionApp) -> bool:
    """The view has a run and every run has ended, with nothing queued."""
    view = app.view
    return bool(view and view.runs and view.active_run is None and not view.queued_inbox)


def text_caught_up(app: BastionApp) -> bool:
    """Every answer on screen shows all of its entry's text (the screen paces streamed
    text, so it may lag the view it draws)."""
    from tui.widgets.entries import AssistantEntry

    view = app.view
    if view is None:
        return False
    for widget in app.query(AssistantEntry):
        entry = widget.entry
        if entry is not None and widget.text_shown != str(view.text_of(entry)):
            return False
    return True


async def screen_settled(pilot: Any) -> None:
    """Until the runs have ended, the answers show all their text and two frames a
    pause apart are the same: what a snapshot should be taken of, however slowly
    the machine draws."""
    await wait_for(lambda: run_settled(pilot.app), pilot)
    await wait_for(lambda: text_caught_up(pilot.app), pilot)
    await until_still(pilot)


async def until_still(pilot: Any, timeout: float = 30.0) -> None:
    """Until two screenshots a short pause apart are the same (nothing left to draw)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    before = None
    while True:
        await pilot.pause(0.05)
        now = pilot.app.export_screenshot()
        if now == before:
            return
        if loop.time() > deadline:
            raise AssertionError("the screen kept changing")
        before = now


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
