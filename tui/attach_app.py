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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runtime import RESYNC, BastionError, Harness
from runtime.model.events import LeaseChanged

if TYPE_CHECKING:
    from runtime import DriverAt, HarnessClient
    from tui.app import BastionApp, Opener

__all__ = ["build_app", "opener", "run_app"]


def opener(
    conversation_id: str,
    said: list[str],
    home: Path | None = None,
    tell: Callable[[str], None] | None = None,
) -> Opener:
    """The app's opener for `bastion attach ID`: a client of the harness that drives the
    session (`tui.attached.connect`); where it comes from is added to `said`, and, for a
    session followed through the store, `tell` hears when this terminal took it over."""

    async def open_attached() -> tuple[HarnessClient, str]:
        from tui.attached import connect

        reached = await connect(conversation_id, home)
        client = reached.client
        if reached.source == "live":
            said.append(f"attached: live from the process driving it (pid {client.server_pid})")
        elif reached.source == "store" and reached.driver is not None:
            said.append(
                f"attached: following through the store; {reached.driver.where()} drives it "
                "(prompts, approvals and Esc reach it there; /model and /mode act there only)"
            )
            if tell is not None:
                watch = _taken_over(client, conversation_id, reached.driver, tell)
                _watching.add(task := asyncio.get_running_loop().create_task(watch))
                task.add_done_callback(_watching.discard)
        else:
            said.append("attached: no process drove this session, so this terminal drives it")
        return client, conversation_id

    return open_attached


_watching: set[asyncio.Task[None]] = set()


async def _taken_over(
    client: HarnessClient, conversation_id: str, driver: DriverAt, tell: Callable[[str], None]
) -> None:
    """Tell once the lease of a session followed through the store is this process's:
    its driver died and this terminal took the session over (runtime.harness.following)."""
    channel = client.subscribe(conversation_id)
    try:
        while (batch := await channel.get()) is not None:
            if batch is RESYNC:
                ours = (await client.snapshot(conversation_id, last=1)).lease_pid
            else:
                assert isinstance(batch, list)
                ours = next((e.pid for e in batch if isinstance(e, LeaseChanged)), None)
            if ours is not None and ours == client.server_pid:
                tell(
                    f"the process driving this session ({driver.where()}) stopped: this "
                    "terminal drives it now, as `bastion -r` would; nothing committed is lost"
                )
                return
    except BastionError:
        pass  # (the app's own subscription says why the harness went)
    finally:
        channel.close()


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
    made: list[BastionApp] = []

    def tell(line: str) -> None:
        made[0].notify(line, title="attach", timeout=15)

    app = BastionApp(
        opener=opener(conversation_id, said, tell=tell),
        theme=theme or config.theme,
        catalog=config.model_info,
        notify=config.notify,
        commands=config.commands,
        notes=said,  # (read once the session is on screen: filled by then)
    )
    made.append(app)
    return app


async def _check(conversation_id: str) -> None:
    async with await Harness.open() as harness:
        await harness.snapshot(conversation_id)
