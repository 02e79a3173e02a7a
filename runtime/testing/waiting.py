"""Waiting in tests and benchmarks: poll a condition until it holds, never sleep a guess.

    from runtime.testing.waiting import gone, until, wait_for

    pids = wait_for(lambda: read_pids(cwd), "the command to write its pids")
    await until(lambda: gone(pid), "the grandchild to die")

Every timeout here is an outer bound for a loaded machine (the suite runs six
workers on two cores), not a measure of speed: a condition that holds returns at
once, and one that never holds fails with `what` in the message.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 30.0  # seconds: generous, so only a condition that never holds fails
STEP = 0.02  # seconds between two polls


def wait_for(
    predicate: Callable[[], T],
    what: str = "the condition",
    timeout: float = TIMEOUT,
    step: float = STEP,
) -> T:
    """Call `predicate` until it returns something true, and return that; raise
    AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(step)


async def until(
    predicate: Callable[[], T],
    what: str = "the condition",
    timeout: float = TIMEOUT,
    step: float = STEP,
) -> T:
    """`wait_for` for a coroutine: polls without blocking the event loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(step)


def state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, Z, ...), or None when there is no
    such process. Without /proc (macOS) a live process is "?": zombies look alive."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:  # no such process (or reaped while being read), or no /proc
        if os.path.isdir("/proc/self"):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # another user's process: it exists
            pass
        return "?"
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def gone(pid: int) -> bool:
    """No process `pid` runs: none exists, or only its zombie waits to be reaped."""
    return state(pid) in (None, "Z", "X")


def alive(pid: int) -> bool:
    return not gone(pid)
