"""Tools as the model loop sees them: a tool's policy (`ToolInfo`), what a call gave back
(`ToolOutcome`), and the shape of a toolbox (`Toolbox`). `runtime.run.toolbox` adapts the
`tools` package to it; MCP servers, the todo list and subagents are toolboxes too."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from runtime.model.llm import ToolSpec

if TYPE_CHECKING:
    from runtime.model.records import ToolCallRecord

__all__ = [
    "CURRENT_CALL",
    "SANDBOX_OVERRIDES",
    "OnStart",
    "ToolInfo",
    "ToolOutcome",
    "Toolbox",
    "ToolboxLayer",
    "invalid_arguments",
    "unknown_tool",
]

#: The call a toolbox is running (set by runtime.run.calls around `Toolbox.run`): a tool
#: that must be idempotent across a crash (runtime.agents' `task`) keys its work by it.
CURRENT_CALL: ContextVar[ToolCallRecord | None] = ContextVar("bastion_current_call", default=None)

# How one approved command may leave the session's sandbox (the user's answer,
# committed with the approval): "outside" runs it unsandboxed, "network" with
# the network allowed.
SANDBOX_OVERRIDES = ("outside", "network")


class ToolInfo(msgspec.Struct, frozen=True):
    read_only: bool
    replay_safe: bool
    concurrent: bool = True  # may run alongside other reads of its turn (runtime.schedule)


class ToolOutcome(msgspec.Struct, frozen=True):
    ok: bool
    model_text: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    images: tuple[dict[str, Any], ...] = ()


# Called once a command's processes have started, with a JSON-able record of them
# for `reap_processes`; an awaitable it returns is awaited before the command is
# waited for.
OnStart = Callable[[dict[str, Any]], object]


class Toolbox(Protocol):
    def specs(self) -> tuple[ToolSpec, ...]: ...

    def info(self, name: str) -> ToolInfo | None: ...

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        *,
        sandbox: str | None = None,  # passed only when the user's answer carries one
    ) -> ToolOutcome: ...

    def close(self) -> None: ...


def invalid_arguments(name: str, detail: str) -> ToolOutcome:
    return ToolOutcome(
        ok=False,
        model_text=f"REFUSED INVALID_ARGUMENT: arguments for {name} are not a JSON object ({detail}).\n"
        "hint: call the tool again with a JSON object matching its schema.",
        data={"refusal": {"code": "INVALID_ARGUMENT", "message": detail}},
    )


def unknown_tool(name: str, known: list[str]) -> ToolOutcome:
    return ToolOutcome(
        ok=False,
        model_text=f"REFUSED INVALID_ARGUMENT: there is no tool named {name!r}.\n"
        f"hint: use one of: {', '.join(known)}.",
        data={"refusal": {"code": "INVALID_ARGUMENT", "message": f"unknown tool {name}"}},
    )


class ToolboxLayer:
    """A toolbox over another (`inner`, or None) that adds or cuts tools: the todo list
    (runtime.plan), MCP servers' tools (runtime.mcp), `task` and a child's cut set
    (runtime.agents). What the call runner asks of a toolbox that a layer does not
    define (preview, capture_effects, sandbox, ...) is the inner toolbox's."""

    def __init__(self, inner: Toolbox | None) -> None:
        self.inner: Toolbox | None = inner

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("inner")  # (not self.inner: that would come back here)
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
