"""How `bastion attach ID` reaches a session: through the one protocol, always.

When a process drives the session, attach connects to its attach socket with the
token beside it (runtime.ipc.listen, runtime.ipc.peer) and is a client of that
harness like any other: prompts, steers, approvals, Esc, /new, /model, /mode,
/compact, /fork, /rewind. When no socket here reaches it but a live process holds
its lease (on another machine, or in another BASTION_HOME on one PostgreSQL store),
attach follows it through the store (`Harness.follow`): the transcript and each
committed event as it lands; prompts, interrupts and approvals go through the store
to that driver; what acts only inside the driving process (/model, /mode, /compact)
is refused in one line naming it; when it dies, this process takes the session over.
When none drives it (its driver exited or died), attach drives it here, in its own
process, as `bastion -r ID` would, and serves it on the attach socket in turn.
Two clients acting at once meet in the store's compare-and-set: one answer to an
approval wins, the other gets the typed error (`NotPending`) as one line.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import msgspec

from runtime import (
    BastionError,
    Connection,
    ConversationBusy,
    DriverAt,
    HarnessClient,
    HarnessGone,
    PeerRefused,
    default_home,
    local_client,
    read_token,
    socket_path,
)

__all__ = ["Reached", "connect"]

#: How often attach tries again when the session's lease changed hands while it looked
#: (a driver that ended just as it was followed, another terminal that took it first).
_TRIES = 5


class Reached(msgspec.Struct, frozen=True):
    """A client of the harness that serves the session, and where it comes from:
    "live" (another process's attach socket), "store" (this process follows the
    process `driver` names through the store) or "here" (this process drives it)."""

    client: HarnessClient
    source: str
    driver: DriverAt | None = None


async def connect(conversation_id: str, home: Path | None = None) -> Reached:
    """A client of the harness serving `conversation_id` (`Reached`). `home`: the
    store's folder (default: $BASTION_HOME's)."""
    path = socket_path(home or default_home(), conversation_id)
    token = read_token(path)
    if token is not None:
        with contextlib.suppress(FileNotFoundError, ConnectionRefusedError, HarnessGone):
            conn = await Connection.unix(str(path))
            try:
                client = await HarnessClient.connect(conn, client="attach", token=token)
                return Reached(client, "live")
            except PeerRefused:
                raise
            except BastionError:
                await conn.close()
    return await _follow_or_drive(conversation_id)


async def _follow_or_drive(conversation_id: str) -> Reached:
    """No socket here serves it: follow the live process that drives it through the
    store, or, when none does, drive it in this one (its lease taken as `bastion -r`
    would); the lease changing hands meanwhile means looking again."""
    from tui.parsers import main_parser
    from tui.session import open_session

    opts: Any = main_parser().parse_args(["--resume", conversation_id])
    session = await open_session(opts, check_model=False)
    harness, mode, model = session.harness, session.approval_mode, session.model
    try:
        for attempt in range(_TRIES):
            driver = await harness.follow(
                conversation_id, approval_mode=mode, model=model, allow=session.allow
            )
            if driver is not None:
                return Reached(await local_client(harness, client="attach"), "store", driver)
            try:
                session.driver = await harness.drive(
                    conversation_id, approval_mode=mode, model=model, allow=session.allow
                )
            except ConversationBusy:
                if attempt == _TRIES - 1:
                    raise
                continue  # another process took the lease as this one looked: follow it
            return Reached(await local_client(harness, client="attach"), "here")
        raise AssertionError("unreachable")  # (the loop returns or raises)
    except BaseException:
        await harness.close()
        raise
