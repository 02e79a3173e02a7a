"""Usage totals with provenance: per run, per model and per conversation.

Each run's `usage` (what the model loop commits) holds the summed counts of
every request the run made, failed attempts included, with:

    quality         measured (every count came from the provider), estimated
                    (some were tiktoken estimates) or unavailable (some could
                    not be counted at all)
    cost            dollars: the provider's own figure where it sent one (as
                    OpenRouter does), else computed from the catalog's prices;
                    None when neither is known
    model           the PROVIDER/NAME the run used
    context_tokens  input + output tokens of its newest request: how full the
                    window was at that point (same quality as the run)

Compaction summaries carry their own usage in the summary entry's data and
count towards the conversation and the model that wrote them.

`usage_summary(view)` is pure: the status line, `/cost` and print mode's JSON
read it from the view they already hold; `Harness.usage(id)` reads it fresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.context.tokens import Quality
from runtime.model.records import EntryKind
from runtime.model.views import ConversationView

__all__ = ["UsageSummary", "UsageTotals", "usage_summary", "worse_quality"]

_ORDER = (Quality.MEASURED, Quality.ESTIMATED, Quality.UNAVAILABLE)


def worse_quality(a: str, b: str) -> Quality:
    """The less trustworthy of two qualities: a sum is only as good as its worst part."""
    return max(Quality(a), Quality(b), key=_ORDER.index)


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Summed counts; `cost` is None when no part had a known price, and
    `cost_complete` says whether every part had one."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    cost_complete: bool = True
    quality: Quality = Quality.MEASURED
    parts: int = 0

    def add(self, usage: Mapping[str, Any]) -> UsageTotals:
        raw = usage.get("cost")
        known = isinstance(raw, int | float) and not isinstance(raw, bool)
        cost = float(raw) if isinstance(raw, int | float) else 0.0
        return UsageTotals(
            self.input_tokens + int(usage.get("input_tokens", 0)),
            self.output_tokens + int(usage.get("output_tokens", 0)),
            self.cached_input_tokens + int(usage.get("cached_input_tokens", 0)),
            self.reasoning_tokens + int(usage.get("reasoning_tokens", 0)),
            ((self.cost or 0.0) + cost) if known else self.cost,
            self.cost_complete and known,
            worse_quality(self.quality, usage.get("quality", Quality.UNAVAILABLE)),
            self.parts + 1,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost": self.cost,
            "cost_complete": self.cost_complete,
            "quality": str(self.quality),
        }


@dataclass(frozen=True, slots=True)
class UsageSummary:
    total: UsageTotals = field(default_factory=UsageTotals)
    per_run: Mapping[str, UsageTotals] = field(default_factory=dict)
    per_model: Mapping[str, UsageTotals] = field(default_factory=dict)
    compaction: UsageTotals = field(default_factory=UsageTotals)
    #: The newest request's input + output tokens and their quality (None: no request yet).
    context_tokens: int | None = None
    context_quality: Quality = Quality.UNAVAILABLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total.to_dict(),
            "per_run": {k: v.to_dict() for k, v in self.per_run.items()},
            "per_model": {k: v.to_dict() for k, v in self.per_model.items()},
            "compaction": self.compaction.to_dict(),
            "context_tokens": self.context_tokens,
            "context_quality": str(self.context_quality),
        }


def _records(view: ConversationView) -> Iterable[tuple[str | None, str, Mapping[str, Any]]]:
    """(run id or None, model, usage) of every run and every summary, oldest first."""
    default = view.conversation.agent.model
    for run in view.runs:
        if run.usage:
            yield run.id, str(run.usage.get("model") or default), run.usage
    for entry in view.settled:
        usage = entry.data.get("usage") if entry.kind == EntryKind.SUMMARY else None
        if usage:
            yield None, str(usage.get("model") or default), usage


def usage_summary(view: ConversationView) -> UsageSummary:
    total, compaction = UsageTotals(), UsageTotals()
    per_run: dict[str, UsageTotals] = {}
    per_model: dict[str, UsageTotals] = {}
    for run_id, model, usage in _records(view):
        total = total.add(usage)
        per_model[model] = per_model.get(model, UsageTotals()).add(usage)
        if run_id is None:
            compaction = compaction.add(usage)
        else:
            per_run[run_id] = UsageTotals().add(usage)
    context: int | None = None
    quality = Quality.UNAVAILABLE
    for run in reversed(view.runs):
        if "context_tokens" in run.usage:
            context = int(run.usage["context_tokens"])
            quality = Quality(run.usage.get("quality", Quality.UNAVAILABLE))
            break
    return UsageSummary(total, per_run, per_model, compaction, context, quality)
