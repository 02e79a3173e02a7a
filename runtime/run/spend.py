"""What an attempt that did not answer cost (issue 25, item 13).

A model request that fails (and is retried, or fails the run) or is cut off by an
interrupt still used the provider. Its spend counts towards the run's usage, and
each such attempt is kept in the run's `usage["attempts"]`:

    {"attempt": 2, "outcome": "failed" | "interrupted", "reason": "...",
     "input_tokens": N, "output_tokens": N, "cached_input_tokens": N,
     "reasoning_tokens": N, "cost": X | None, "quality": "measured" | ...}

A process killed mid-stream cannot count its attempt; the driver that takes the
run over does (`count_crashed`, in the recovery transaction): about 4 characters
a token for the prompt before the partial and for the partial itself
(estimated), with no cost (so the totals say their cost is incomplete).

The counts are the provider's when it sent usage before it stopped (measured);
else, when the stream had sent anything, tiktoken estimates of the request and
of what was streamed (estimated); a request that failed before any data came
back (a refused request, a connect error, a 429) is counted as nothing, since
providers do not bill those. An estimated attempt makes the run's quality (and
so every total over it) estimated: the totals never claim to be measured when a
part was guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from runtime.context.tokens import estimate_usage_async
from runtime.model.llm import ModelRequest, Usage
from runtime.model.records import ACTIVE_RUN_STATES, Entry
from runtime.model.results import Quality
from runtime.store.tx import Tx

__all__ = ["AttemptSpend", "Spent", "count_crashed"]

_ORDER = (Quality.MEASURED, Quality.ESTIMATED, Quality.UNAVAILABLE)


def _worse(a: str, b: str) -> Quality:
    return max(Quality(a), Quality(b), key=_ORDER.index)


class AttemptSpend(msgspec.Struct, frozen=True):
    """What one attempt that did not answer used, and how well that is known."""

    usage: Usage
    quality: Quality

    @classmethod
    async def of(
        cls,
        request: ModelRequest,
        streamed: str,
        reported: Usage | None,
        price: Callable[[Usage], Usage],
    ) -> AttemptSpend:
        """`reported`: the provider's usage if it sent some; `streamed`: the text and
        reasoning it sent before it stopped."""
        if reported is not None:
            return cls(price(reported), Quality.MEASURED)
        if not streamed:
            return cls(Usage(), Quality.MEASURED)  # nothing came back: nothing billed
        usage, quality = await estimate_usage_async(request.messages, streamed)
        return cls(price(usage), quality)

    def record(self, attempt: int, outcome: str, reason: str) -> dict[str, Any]:
        out = self.usage.to_dict()
        out.update(attempt=attempt, outcome=outcome, reason=reason, quality=str(self.quality))
        return out


class Spent(msgspec.Struct):
    """The attempts of one turn that did not answer: their summed usage and records."""

    usage: Usage = msgspec.field(default_factory=Usage)
    quality: Quality = Quality.MEASURED
    attempts: list[dict[str, Any]] = msgspec.field(default_factory=list)

    def add(self, spend: AttemptSpend, attempt: int, outcome: str, reason: str) -> None:
        self.usage = self.usage + spend.usage
        self.quality = _worse(self.quality, spend.quality)
        self.attempts.append(spend.record(attempt, outcome, reason))

    def into(self, record: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
        """`record` (a run's usage dict) with these attempts after `earlier`'s."""
        attempts = [*earlier.get("attempts", ()), *self.attempts]
        if attempts:
            record["attempts"] = attempts
        return record


def count_crashed(tx: Tx, partial: Entry) -> None:
    """Add the attempt a crash cut off (its kept `partial`) to its run's usage."""
    run = tx.run(partial.run_id) if partial.run_id else None
    if run is None or run.state not in ACTIVE_RUN_STATES:
        return
    [(before,)] = tx.rows(
        "SELECT COALESCE(SUM(LENGTH(text)), 0) FROM entries "
        "WHERE conversation_id = ? AND position < ?",
        (tx.conversation_id, partial.position),
    )
    reasoning = str(partial.data.get("reasoning") or "")
    usage = Usage(int(before) // 4 + 1, (len(partial.text) + len(reasoning)) // 4 + 1)
    spent = Spent()
    attempt = len(run.usage.get("attempts", ())) + 1
    spent.add(AttemptSpend(usage, Quality.ESTIMATED), attempt, "interrupted", "the process stopped")
    record = dict(run.usage)
    total = Usage.from_dict(run.usage) + usage
    record.update(total.to_dict())
    record["quality"] = _worse(run.usage.get("quality", Quality.MEASURED), Quality.ESTIMATED)
    tx.transition_run(run.id, ACTIVE_RUN_STATES, usage=spent.into(record, run.usage))
