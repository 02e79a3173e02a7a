"""A run's budget: how many model requests, how much money and how much time it may take.

Four limits, each optional: `max_turns` (model requests in one run, counted from the
store, so a resumed run keeps its count), `max_cost` (USD: the provider's figure when
it sends one, else the catalog's or the user's [models] prices), `time_limit`
(seconds of wall time, counted from when this process starts driving the run) and
`session_max_cost` (USD for the whole session: every run of its top conversation and
of every subagent below it, whichever process drove them, so a session stays capped
across resumes). They come from the user's config, which a trusted project file may
only lower, and from `-p`'s flags, which override both.

A run that reaches a limit ends *interrupted*, never failed: its partial answer and
every committed call stay, and its `error` records which limit (`code` is the key's
name) so every front end, and a later `--resume`, can say why. Turns and costs are
checked before each model request (a subagent's request counts against its
session's cap too); the time limit also cuts a request or a command
under way.

When `max_cost` is set but the cost cannot be known (no prices for the model and the
provider sent none), the run stops after its first request rather than spend without
a measure: a cap that cannot be kept is not silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from runtime.model.errors import ConfigError

if TYPE_CHECKING:  # (the config reads this module: it stays light to import)
    import asyncio

    from runtime.model.records import Entry, Run

__all__ = [
    "BUDGET_CODES", "BUDGET_KEYS", "Budget", "check_budget_keys", "lower_only", "start_deadline",
    "stop_before_request",
]  # fmt: skip

BUDGET_KEYS = ("max_turns", "max_cost", "time_limit", "session_max_cost")
#: The `error.code` an interrupted run carries when a budget stopped it.
BUDGET_CODES = frozenset(BUDGET_KEYS)
_EXAMPLES = {
    "max_turns": "max_turns = 20",
    "max_cost": "max_cost = 0.5",
    "time_limit": "time_limit = 600",
    "session_max_cost": "session_max_cost = 5",
}
_WHAT = {
    "max_turns": "a whole number of model requests",
    "max_cost": "an amount in USD",
    "time_limit": "a number of seconds",
    "session_max_cost": "an amount in USD",
}


class Budget(msgspec.Struct, frozen=True):
    max_turns: int | None = None
    max_cost: float | None = None
    time_limit: float | None = None
    session_max_cost: float | None = None

    @classmethod
    def from_mapping(cls, data: Any) -> Budget:
        turns, cost, time, session = (data.get(key) for key in BUDGET_KEYS)
        return cls(
            int(turns) if turns is not None else None,
            float(cost) if cost is not None else None,
            float(time) if time is not None else None,
            float(session) if session is not None else None,
        )

    def but(self, **flags: Any) -> Budget:
        """This budget with the limits `flags` name (None: keep this one's)."""
        values = {key: getattr(self, key) for key in BUDGET_KEYS}
        values.update({key: value for key, value in flags.items() if value is not None})
        return Budget.from_mapping(values)

    def __bool__(self) -> bool:
        return any(getattr(self, key) is not None for key in BUDGET_KEYS)

    def over(self, turns: int, cost: float | None, spent_tokens: int) -> dict[str, Any] | None:
        """The error to stop with before the next model request, or None to go on."""
        if self.max_turns is not None and turns >= self.max_turns:
            return stop_error(
                "max_turns", f"the run reached its turn limit ({self.max_turns})", self.max_turns
            )
        if self.max_cost is None or spent_tokens == 0:
            return None
        if cost is None:
            return stop_error(
                "max_cost",
                f"the cost of this run is unknown (no prices for the model and the provider "
                f"sent none), so its cost limit (${self.max_cost:g}) cannot be kept; set "
                "input_price/output_price in a [models] table",
                self.max_cost,
            )
        if cost >= self.max_cost:
            return stop_error(
                "max_cost",
                f"the run reached its cost limit (${cost:.4f} of ${self.max_cost:g})",
                self.max_cost,
            )
        return None

    def over_session(self, cost: float | None, spent_tokens: int) -> dict[str, Any] | None:
        """The error to stop with when the whole session's spend is at its cap."""
        cap = self.session_max_cost
        if cap is None or spent_tokens == 0:
            return None
        if cost is None:
            return stop_error(
                "session_max_cost",
                f"the cost of this session is unknown (no prices for the model and the "
                f"provider sent none), so its cost limit (${cap:g}) cannot be kept; set "
                "input_price/output_price in a [models] table",
                cap,
            )
        if cost >= cap:
            return stop_error(
                "session_max_cost",
                f"the session reached its cost limit (${cost:.4f} of ${cap:g}); raise "
                "session_max_cost in your config (or --session-max-cost) to go on",
                cap,
            )
        return None

    def out_of_time(self) -> dict[str, Any]:
        assert self.time_limit is not None
        return stop_error(
            "time_limit", f"the run reached its time limit ({self.time_limit:g} s)", self.time_limit
        )


def stop_before_request(
    budget: Budget,
    entries: Sequence[Entry],
    run: Run,
    children: tuple[float | None, int] = (None, 0),
    session: tuple[float | None, int] = (None, 0),
) -> dict[str, Any] | None:
    """The error a turn or cost limit stops `run` with before its next request (its
    turns counted from its answers in `entries`; its cost with what the subagents
    it started spent, `children`: dollars or None, tokens; the whole session's spend,
    `session`, likewise), or None to go on."""
    if not budget:
        return None
    stop = budget.over_session(*session)
    if stop is not None:
        return stop
    from runtime.model.llm import Usage
    from runtime.model.records import EntryKind

    turns = sum(1 for e in entries if e.kind == EntryKind.ASSISTANT and e.run_id == run.id)
    usage = Usage.from_dict(run.usage)
    child_cost, child_tokens = children
    cost = usage.cost
    if child_cost is not None:
        cost = (cost or 0.0) + child_cost
    return budget.over(turns, cost, usage.input_tokens + usage.output_tokens + child_tokens)


def start_deadline(
    budget: Budget, expire: Callable[[dict[str, Any]], bool]
) -> asyncio.Task[None] | None:
    """A timer for the budget's time limit, from now: when it runs out, `expire(error)`
    is told, and if it answers true the current task (the run's) is cancelled."""
    import asyncio  # (here: reading a config's budget keys must not load asyncio)

    limit, task = budget.time_limit, asyncio.current_task()
    if limit is None or task is None:
        return None

    async def wait() -> None:
        await asyncio.sleep(limit)
        if expire(budget.out_of_time()):
            task.cancel()

    return asyncio.create_task(wait(), name="run-time-limit")


def stop_error(code: str, message: str, limit: float) -> dict[str, Any]:
    return {"code": code, "message": message, "limit": limit}


def check_budget_keys(path: Path, data: dict[str, Any]) -> None:
    """Refuse a budget key that is not a positive number (whole, for max_turns)."""
    for key in BUDGET_KEYS:
        if key not in data:
            continue
        value = data[key]
        ok = type(value) is int if key == "max_turns" else type(value) in (int, float)
        if not ok or not math.isfinite(value) or value <= 0:
            raise ConfigError(
                f"{path}: {key} must be {_WHAT[key]} above 0, not {value!r}",
                hint=f"for example {_EXAMPLES[key]}",
            )


def lower_only(key: str, value: Any, user: dict[str, Any]) -> str | None:
    """Why a project file may not set budget `key` to `value` (None: it may). A project
    may set a limit the user has not, or lower the user's; never raise it."""
    mine = user.get(key)
    if mine is None or value <= mine:
        return None
    return f"{key} {value!r} (above yours, {mine!r}: a project may only lower a limit)"
