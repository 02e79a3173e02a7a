"""`bastion attach ID` on a terminal: the Textual app on a session, as a second terminal.

The app is the same one `bastion` runs, given a `HarnessClient` of the harness that
drives the session (`tui.attached.connect`: the driving process's, over its attach
socket; or one in this process when none drives it). Every key and command does what
it does in the first terminal, through the same protocol; the first terminal sees
the change as events. Quitting leaves the session to its driver.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import Harness

if TYPE_CHECKING:
    from runtime import HarnessClient
    from tui.app import BastionApp, Opener

__all__ = ["build_app", "opener", "run_app"]


def opener(conversation_id: str, said: list[str], home: Path | None = None) -> Opener:
    """The app's opener for `bastion attach ID`: a client of the harness that drives the
    session (`tui.attached.connect`); where it comes from is added to `said`."""

    async def open_attached() -> tuple[HarnessClient, str]:
        from tui.attached import connect

        client, source = await connect(conversation_id, home)
        if source == "live":
            said.append(f"attached: live from the process driving it (pid {client.server_pid})")
        else:
            said.append("attached: no process drove this session, so this terminal drives it")
        return client, conversation_id

    return open_attached


def run_app(conversation_id: str, *, theme: str | None = None) -> int:
    """The app attached to `conversation_id` until the user quits (the session goes on)."""
    from tui.launch import size_from_the_terminal

    size_from_the_terminal()
    asyncio.run(_check(conversation_id))  # an unknown id fails here, before the screen
    app = build_app(conversation_id, theme=theme)
    code = app.run() or 0
    if app.failed_line is not None:  # the driving process's store failed (seed 004)
        from tui.exits import EXIT_FAILED, error_line

        error_line(app.failed_line)
        return EXIT_FAILED
    return code


def build_app(conversation_id: str, *, theme: str | None = None) -> BastionApp:
    """The app `bastion attach ID` runs (the app's tests open theirs with this too)."""
    from runtime import load_config
    from tui.app import BastionApp

    said: list[str] = []
    config = load_config(os.getcwd())
    return BastionApp(
        opener=opener(conversation_id, said),
        theme=theme or config.theme,
        catalog=config.model_info,
        notify=config.notify,
        commands=config.commands,
        notes=said,  # (read once the session is on screen: filled by then)
    )


async def _check(conversation_id: str) -> None:
    async with await Harness.open() as harness:
        await harness.snapshot(conversation_id)
