"""Words for what a run is doing or why it stopped, shared by the app, `--plain`
and print mode: a compaction under way, what one freed, a budget that stopped a run."""

from __future__ import annotations

from typing import Any

from runtime.model.records import Entry
from tui.usage import count

__all__ = [
    "BUDGET_NAMES",
    "budget_stop",
    "compacting_label",
    "compaction_event_line",
    "summary_label",
]

BUDGET_NAMES = {
    "max_turns": "turn limit",
    "max_cost": "cost limit",
    "time_limit": "time limit",
    "session_max_cost": "session cost limit",
}


def compacting_label(entries: int, tokens: int, written: int = 0) -> str:
    """`compacting 12 entries (~8.2k tokens) · 1.3k chars written`."""
    what = f"{entries} entr{'y' if entries == 1 else 'ies'}" if entries else "older turns"
    label = f"compacting {what}" + (f" (~{count(tokens)} tokens)" if tokens else "")
    return label + (f" · {count(written)} chars written" if written else "")


def summary_label(entry: Entry) -> str:
    """The transcript's line for a summary entry: what it covers and what it freed."""
    compacted = entry.data.get("compacted")
    what = f"{compacted} earlier entries" if compacted else "the earlier conversation"
    freed = entry.data.get("freed_tokens")
    gain = f", ~{count(int(freed))} tokens freed" if freed else ""
    return f"— compacted {what}{gain} (still shown above; the model gets a summary) —"


def compacting_notice(event: Any) -> str:
    """Why a compaction that starts does (the app says it once, as a notice)."""
    label = compacting_label(event.entries, event.tokens)
    if getattr(event, "background", False):
        return (
            f"{label} in the background: the conversation nears the model's context "
            "window; the run goes on meanwhile"
        )
    return (
        f"{label}: the conversation no longer fits the model's context window with room "
        "for an answer. Esc declines (the run goes on uncompacted, and the provider may "
        "refuse it)"
    )


def compaction_event_line(event: Any) -> str | None:
    """One line for a CompactionProgress event a line front end prints (None: nothing)."""
    match event.phase:
        case "started" if getattr(event, "background", False):
            return compacting_label(event.entries, event.tokens) + " in the background…"
        case "started":
            return compacting_label(event.entries, event.tokens) + " to fit the window…"
        case "cancelled" | "failed":
            return event.message or f"compaction {event.phase}"
    return None


def budget_stop(run: Any) -> str | None:
    """`stopped at its turn limit (3)` for a run a budget stopped; None otherwise."""
    error = run.error or {}
    name = BUDGET_NAMES.get(str(error.get("code")))
    if name is None:
        return None
    return str(error.get("message") or f"stopped at its {name}")
