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

Compaction summaries and reset handoff notes carry their own usage in their
entry's data and count towards the conversation and the model that wrote them.

`usage_summary(view)` is pure: the status line, `/cost` and print mode's JSON
read it from the view they already hold; `Harness.usage(id)` reads it fresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runtime.model.records import EntryKind
from runtime.model.results import Quality, UsageSummary, UsageTotals, worse_quality
from runtime.model.views import ConversationView

__all__ = ["UsageSummary", "UsageTotals", "usage_summary", "worse_quality"]


_NOTED = (EntryKind.SUMMARY, EntryKind.RESET)  # a summary's and a handoff note's own spend


def _records(view: ConversationView) -> Iterable[tuple[str | None, str, Mapping[str, Any]]]:
    """(run id or None, model, usage) of every run and every summary, oldest first."""
    default = view.conversation.agent.model
    for run in view.runs:
        if run.usage:
            yield run.id, str(run.usage.get("model") or default), run.usage
    for entry in view.settled:
        usage = entry.data.get("usage") if entry.kind in _NOTED else None
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
