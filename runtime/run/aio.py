"""Small asyncio helpers that never swallow a cancellation.

Python 3.11's `asyncio.wait_for` returns the inner result when the inner
awaitable finishes at the moment the outer task is cancelled, and the
cancellation is lost: a loop around it then runs forever under a `stop()`.
`asyncio.wait` has no such race, so waiting with a timeout goes through it.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def wait_until(awaitable: Any, timeout: float) -> bool:
    """Wait for `awaitable` (an Event's `wait()`, a future) at most `timeout` seconds;
    true if it finished. A coroutine is cancelled if it had not finished; a future
    passed in is left alone."""
    is_future = asyncio.isfuture(awaitable)
    waiter = awaitable if is_future else asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        if not is_future and not waiter.done():
            waiter.cancel()
    return bool(done)
