"""The shape every tool module exports, and the guard that keeps exceptions in."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple

from tools.context import ToolContext
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult

Args = dict[str, Any]
RunAsync = Callable[[ToolContext, Args], Coroutine[Any, Any, ToolResult]]
RunSync = Callable[[ToolContext, Args], ToolResult]


class ToolDef(NamedTuple):
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool
    replay_safe: bool
    run: RunAsync
    # The blocking core, for tools that have one (used by ``python -m tools``
    # so a one-shot run does not pay for importing asyncio).
    run_sync: RunSync | None = None

    def schema(self) -> dict[str, Any]:
        """The provider-neutral function declaration."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def guarded(tool: str, core: RunSync, ctx: ToolContext, args: Args) -> ToolResult:
    """Run a blocking core; refusals become results, host errors become INTERNAL."""
    try:
        return core(ctx, args)
    except Refused as exc:
        return ToolResult.from_refused(tool, exc)
    except MemoryError:
        return ToolResult.refused(
            tool,
            RefusalCode.TOO_LARGE,
            "out of memory",
            "ask for less (a smaller page or a narrower search)",
        )
    except Exception as exc:  # host error: say what kind, name no host path
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return ToolResult.refused(
            tool,
            RefusalCode.INTERNAL,
            f"{tool} failed: {detail}",
            "retry once; if it fails again, try another approach",
        )


def offloaded(tool: str, core: RunSync) -> RunAsync:
    """An async entry point that runs ``core`` in a worker thread."""

    async def run(ctx: ToolContext, args: Args) -> ToolResult:
        import asyncio  # deferred: a one-shot CLI run never needs the event loop

        return await asyncio.to_thread(guarded, tool, core, ctx, args)

    run.__name__ = f"run_{tool}"
    return run
