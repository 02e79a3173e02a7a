"""`HarnessThread`: a daemon thread running an asyncio loop of its own, for the harness.

Apart from `runtime.ipc.channel` (the channel and the `ThreadedHarness` proxy, which
import the events and views) so that `bastion` can start the thread before its
first frame without loading anything else of the runtime.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["HarnessThread"]

T = TypeVar("T")


class HarnessThread:
    """A daemon thread running an asyncio loop of its own, for the harness."""

    def __init__(self, name: str = "bastion-harness") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the harness loop and wait for it (from any other thread)."""
        return self.submit(coro).result()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the harness loop; await it from the caller's loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
