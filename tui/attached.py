"""How `bastion attach ID` reaches a session: through the one protocol, always.

When a process drives the session, attach connects to its attach socket with the
token beside it (runtime.ipc.listen, runtime.ipc.peer) and is a client of that
harness like any other: prompts, steers, approvals, Esc, /new, /model, /mode,
/compact, /fork, /rewind. When none does (its driver exited or died), attach drives
it here, in its own process, as `bastion -r ID` would, and serves it on the attach
socket in turn: either way the second terminal can do everything the first can.
Two clients acting at once meet in the store's compare-and-set: one answer to an
approval wins, the other gets the typed error (`NotPending`) as one line.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from runtime import (
    BastionError,
    Connection,
    HarnessClient,
    HarnessGone,
    PeerRefused,
    default_home,
    local_client,
    read_token,
    socket_path,
)

__all__ = ["connect"]


async def connect(conversation_id: str, home: Path | None = None) -> tuple[HarnessClient, str]:
    """(a client of the harness driving `conversation_id`, where it comes from: "live"
    from another process, or "here" when this process had to drive it). `home`: the
    store's folder (default: $BASTION_HOME's)."""
    path = socket_path(home or default_home(), conversation_id)
    token = read_token(path)
    if token is not None:
        with contextlib.suppress(FileNotFoundError, ConnectionRefusedError, HarnessGone):
            conn = await Connection.unix(str(path))
            try:
                return await HarnessClient.connect(conn, client="attach", token=token), "live"
            except PeerRefused:
                raise
            except BastionError:
                await conn.close()
    return await _drive_here(conversation_id), "here"


async def _drive_here(conversation_id: str) -> HarnessClient:
    """No process serves it: drive it in this one (its lease taken as `bastion -r` would)."""
    from tui.parsers import main_parser
    from tui.session import drive_session, open_session

    opts: Any = main_parser().parse_args(["--resume", conversation_id])
    session = await open_session(opts, check_model=False)
    session = await drive_session(session, interactive=True)
    return await local_client(session.harness, client="attach")
