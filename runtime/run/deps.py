"""What a run is given (`LoopDeps`, `LoopSettings`) and what a run's tool calls see of
it (`CallHost`): apart from the loop, so the call runner (runtime.run.calls) names
the run it serves without importing the loop that imports it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import msgspec

from runtime.config.approvals import ApprovalMode
from runtime.config.settings import RuleBook
from runtime.context.catalog import ModelInfo
from runtime.context.compaction import CompactionSettings
from runtime.hooks.context import RunContext
from runtime.hooks.points import Hooks
from runtime.model.events import Event
from runtime.model.llm import Provider
from runtime.model.records import Run
from runtime.model.tools import Toolbox
from runtime.run.budget import Budget
from runtime.run.live import LiveStream
from runtime.store.database import Store

__all__ = ["CallHost", "LoopDeps", "LoopSettings"]

T = TypeVar("T")


class LoopSettings(msgspec.Struct, frozen=True):
    checkpoint_interval: float = 0.1
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    max_turns: int = 200
    retry_deadline: float = 300.0  # no retry is started once this long has been spent retrying
    approval_poll: float = (
        0.5  # how often a pending approval is re-read (another process may answer)
    )
    output_commit_limit: int = 262_144  # characters of a running command's output checkpointed
    # A limit reached ends the run interrupted.
    budget: Budget = msgspec.field(default_factory=Budget)
    reasoning_effort: str = ""  # the config's default; a conversation's own setting wins
    parallel_calls: int = 4  # read-only calls of one turn run at once (1: one after another)


class LoopDeps(msgspec.Struct):
    store: Store
    publish: Callable[[Event], None]
    provider: Provider
    model: str
    model_info: ModelInfo
    output_cap: int
    toolbox: Toolbox | None
    approval_mode: ApprovalMode
    interactive: bool
    token: int
    live: LiveStream
    wait_for_decision: Callable[[str], Awaitable[None]]
    settings: LoopSettings = msgspec.field(default_factory=LoopSettings)
    on_refusal: Callable[[str, str], None] | None = None
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    rules: RuleBook | None = None
    hooks: Hooks | None = None  # the user's (and a trusted project's) hooks


class CallHost(RunContext, Protocol):
    """The run a `CallRunner` serves (runtime.run.loop.RunExecutor): what hooks see of
    it (RunContext: its commits and entries), its state changes and the sequence of
    its live events."""

    deps: LoopDeps

    def next_seq(self) -> int: ...

    async def transition(
        self, run: Run, from_states: tuple[str, ...] = ..., **changes: Any
    ) -> Run: ...

    async def check_interrupt(self, run: Run) -> None: ...
