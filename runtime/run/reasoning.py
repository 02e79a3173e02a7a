"""Reasoning effort: how hard a reasoning model thinks, per conversation.

One word for every wire format: `minimal`, `low`, `medium` or `high`, sent as
the chat completions `reasoning_effort`, the Responses API's `reasoning.effort`,
and Anthropic's extended thinking (`thinking.budget_tokens`: runtime.providers.
anthropic.THINKING_BUDGETS). Unset (`default`), nothing is sent and the model
thinks as it does by default (an Anthropic model: not at all).

The conversation keeps its own (`/effort`, `Harness.set_reasoning_effort`); a new
one starts with the config's `reasoning_effort`, which also applies to older
conversations that never chose one. A model that has no reasoning refuses the
field with a one-line provider error naming it: `/effort default` clears it.
"""

from __future__ import annotations

from runtime.model.errors import ConfigError

__all__ = ["EFFORTS", "parse_effort"]

EFFORTS = ("minimal", "low", "medium", "high")


def parse_effort(text: str) -> str:
    """`text` as a stored effort: one of EFFORTS, or "" for `default`/`off`/`none`."""
    word = text.strip().lower()
    if word in ("", "default", "off", "none"):
        return ""
    if word not in EFFORTS:
        raise ConfigError(
            f"unknown reasoning effort {text!r}",
            hint=f"use one of {', '.join(EFFORTS)}, or default",
        )
    return word
