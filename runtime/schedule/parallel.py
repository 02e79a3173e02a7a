"""Parallel tool calls: the read-only calls of one turn run at once, bounded.

A model may ask for several calls in one response. Calls that only read (the
tool declares itself read-only and replay-safe, and the call needs no
approval) and stand next to each other in the asked order form one group and
run concurrently, at most `MAX_PARALLEL` at a time. Every other call (a write,
a command, anything that asks) is a group of its own: it starts only after
every call before it has finished, and the calls after it wait for its result.
So for `read, read, write, read` the two first reads overlap, the write waits
for both, and the last read waits for the write.

Each call keeps its own durable steps (intent → start → result, each a
compare-and-set in its own transaction, runtime.run.calls), so a crash in the
middle of a group leaves each call exactly where it was: a read that had
started is run again on resume (it is replay-safe), one with a result is not.
Results land as each call finishes; the request builder (runtime.context.messages)
answers each assistant message's calls in the order the model asked them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from runtime.model.records import Approval, ToolCallRecord, ToolCallState
from runtime.model.tools import ToolInfo

MAX_PARALLEL = 4  # read-only calls of one group running at once


def may_overlap(call: ToolCallRecord, info: ToolInfo | None) -> bool:
    """Whether `call` may run alongside its neighbours: its tool only reads (read-only and
    safe to run again after a crash) and does not say otherwise, and it runs without
    asking."""
    if info is None or not (info.read_only and info.replay_safe and info.concurrent):
        return False
    if call.approval != Approval.NOT_REQUIRED:
        return False
    return call.state in (ToolCallState.PENDING, ToolCallState.RUNNING)


def groups(
    calls: Sequence[ToolCallRecord], overlaps: Callable[[ToolCallRecord], bool]
) -> list[tuple[ToolCallRecord, ...]]:
    """`calls` in asked order, cut into groups: each run of neighbours that may overlap is
    one group; every other call is a group of one."""
    out: list[tuple[ToolCallRecord, ...]] = []
    together: list[ToolCallRecord] = []
    for call in calls:
        if overlaps(call):
            together.append(call)
            continue
        if together:
            out.append(tuple(together))
            together = []
        out.append((call,))
    if together:
        out.append(tuple(together))
    return out


async def run_together(
    calls: Sequence[ToolCallRecord],
    one: Callable[[ToolCallRecord], Awaitable[object]],
    limit: int = MAX_PARALLEL,
) -> None:
    """Run `one(call)` for every call, at most `limit` at once, and return when all have.

    If one fails or this is cancelled (an interrupt), the others are cancelled and
    waited for before the failure goes on: nothing of the group is left running
    when the run settles its open calls.
    """
    gate = asyncio.Semaphore(max(1, limit))

    async def bounded(call: ToolCallRecord) -> None:
        async with gate:
            await one(call)

    tasks = [asyncio.create_task(bounded(c), name=f"tool-{c.name}-{c.index}") for c in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
