"""A harness in this process, reached through the protocol all the same: print mode,
`--plain`, `bastion acp` and the tests hold a `HarnessClient` over a socket pair whose
other end `runtime.ipc.server` serves on the same event loop. There is no second API
for the in-process case: what they send is what the app sends its harness process.

    client = await local_client(harness)      # the owner: its close closes the harness
"""

from __future__ import annotations

import asyncio

from runtime.harness import Harness
from runtime.ipc.client import HarnessClient
from runtime.ipc.server import serve
from runtime.ipc.wire import connect_pair

__all__ = ["local_client"]


async def local_client(
    harness: Harness, *, client: str = "local", owner: bool = True
) -> HarnessClient:
    """A client of `harness`, served on this loop until the client closes it (`owner`:
    and its close closes the harness; a test that reads the store afterwards is not)."""
    theirs, ours = await connect_pair()
    serving = asyncio.get_running_loop().create_task(serve(harness, theirs, owner=owner))
    connected = await HarnessClient.connect(ours, client=client, owner=owner, elsewhere=False)
    connected.serving = serving
    return connected
