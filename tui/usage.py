"""What the front end knows of token use, read from the view in one place.

Today the view holds each run's usage (provider counts, or tiktoken estimates
marked by `quality`); the context window of a model is not known yet. A model
catalog and usage provenance will come later and are read through these few
functions, so the status line and `/cost` need not change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import msgspec

from runtime.model.records import Entry, Run
from runtime.model.views import ConversationView

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Context", "Totals", "context_of", "context_window", "count", "totals", "totals_label"]

CHARS_PER_TOKEN = 4  # a rough estimate of the transcript's size before the first request


class Totals(msgspec.Struct, frozen=True):
    input_tokens: int
    output_tokens: int
    cost: float | None
    estimated: bool  # some count is a tiktoken estimate, not the provider's

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Context(msgspec.Struct, frozen=True):
    used: int
    window: int | None
    estimated: bool

    @property
    def percent(self) -> int | None:
        return None if not self.window else round(100 * self.used / self.window)


def totals(view: ConversationView) -> Totals:
    """The conversation's tokens and cost over all its runs (summed once per tuple of
    runs: the status line asks every frame)."""
    return _per_tuple(view.runs, _totals)


def _totals(runs: tuple[Run, ...]) -> Totals:
    tokens_in = tokens_out = 0
    cost: float | None = None
    estimated = False
    for run in runs:
        usage = run.usage
        tokens_in += int(usage.get("input_tokens", 0))
        tokens_out += int(usage.get("output_tokens", 0))
        if isinstance(usage.get("cost"), int | float):
            cost = (cost or 0.0) + float(usage["cost"])
        estimated = estimated or usage.get("quality", "measured") != "measured"
    return Totals(tokens_in, tokens_out, cost, estimated)


#: What is known of a model spec: `Config.model_info` (the catalog with the user's
#: [models."…"] tables applied).
Catalog = Callable[[str], Any]


def context_window(model: str, catalog: Catalog | None = None) -> int | None:
    """The model's context window in tokens, from `catalog` (the user's config) or else
    the built-in model catalog (a model neither knows gets a conservative default);
    None with no model."""
    if not model:
        return None
    if catalog is not None:
        return int(catalog(model).context_window)
    from runtime import lookup

    return lookup(model).context_window


_last: dict[Callable[..., Any], tuple[tuple[Any, ...], Any]] = {}


def _per_tuple(items: tuple[T, ...], compute: Callable[[tuple[T, ...]], R]) -> R:
    """`compute(items)`, computed again only for another tuple than last time's (a view
    keeps an unchanged part as the same tuple)."""
    last = _last.get(compute)
    if last is None or last[0] is not items:
        last = _last[compute] = (items, compute(items))
    return cast(R, last[1])


def _estimate(entries: tuple[Entry, ...]) -> int:
    return sum(len(e.text) for e in entries) // CHARS_PER_TOKEN


def context_of(view: ConversationView, model: str, catalog: Catalog | None = None) -> Context:
    """How much of the window the conversation fills: what the provider reported for the
    newest request when it did, else estimated from the text; the window from `catalog`."""
    for run in reversed(view.runs):
        usage = run.usage or {}
        measured = usage.get("context_tokens")
        if isinstance(measured, int) and measured > 0:
            quality = usage.get("quality", "measured")
            return Context(
                measured, context_window(model, catalog), estimated=quality != "measured"
            )
        if usage:
            break
    return Context(
        _per_tuple(view.settled, _estimate), context_window(model, catalog), estimated=True
    )


def summary_label(totals: Any) -> str:
    """`1.2k in, 32 out $0.0012` of a `UsageTotals` (the harness's usage summary)."""
    estimated = str(totals.quality) != "measured"
    mark = "~" if estimated else ""
    text = f"{mark}{count(totals.input_tokens)} in, {mark}{count(totals.output_tokens)} out"
    if totals.cost is not None:
        text += f" ${totals.cost:.4f}" + ("" if totals.cost_complete else " (some unpriced)")
    else:
        text += ", cost unknown (the provider did not report it)"
    return text + (" (~ estimated)" if estimated else "")


def count(n: int) -> str:
    """12, 1.2k, 12k, 1.2M."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def totals_label(view: ConversationView, *, long: bool = False) -> str:
    """`~1.2k tok $0.0123`; with `long`, input and output apart."""
    t = totals(view)
    mark = "~" if t.estimated else ""
    if long:
        text = f"{mark}{count(t.input_tokens)} in, {mark}{count(t.output_tokens)} out"
        if t.estimated:
            text += " (~ estimated)"
    else:
        text = f"{mark}{count(t.tokens)} tok"
    if t.cost is not None:
        text += f" ${t.cost:.4f}"
    elif long:
        text += ", cost unknown (the provider did not report it)"
    return text
