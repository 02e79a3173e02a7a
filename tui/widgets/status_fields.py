"""The status bar's fields for a view: run state, mode, queued, model, context, tokens, id.

Apart from `tui.widgets.status` because they read the runtime's records, which
load after the first frame (see tui.launch); the bar shows only the model until then.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from runtime.model.records import EntryKind, EntryStatus, Run, RunState, ToolCallState
from runtime.model.views import Compacting, ConversationView
from tui.markup import escape
from tui.run_words import BUDGET_NAMES, compacting_label
from tui.usage import Catalog, Totals, context_of, count, totals
from tui.widgets.field import Field

if TYPE_CHECKING:
    from runtime import UsageTotals
    from runtime.model.records import SessionSettings

__all__ = ["fields", "run_state_label"]

MAX_TOOL_NAME = 20
_STATE = {
    RunState.QUEUED: ("$accent", "queued"),
    RunState.RUNNING: ("$accent", "running"),
    RunState.AWAITING_APPROVAL: ("$warning", "awaiting approval"),
    RunState.COMPLETED: ("$success", "done"),
    RunState.INTERRUPTED: ("$warning", "interrupted"),
    RunState.FAILED: ("$error", "failed"),
    RunState.CANCELLED: ("$warning", "cancelled"),
}
_MODE_TONE = {
    "read-only": "$success", "plan": "$success", "ask": "$primary", "auto-edit": "$warning",
}  # fmt: skip


def _activity(view: ConversationView, run: Run) -> str:
    """What a running run is doing: compacting, running a tool, writing, or thinking."""
    compacting = view.compacting.get(run.id) or _background_summary(view)
    if compacting is not None:
        label = compacting_label(compacting.entries, compacting.tokens, compacting.written)
        if compacting.background:  # the run goes on: what it does, then the summary
            return f"{_working(view, run)} · {label} in the background"
        return f"{label} · esc cancels"
    return _working(view, run)


def _background_summary(view: ConversationView) -> Compacting | None:
    """A summary being made in the background, by this run or one an earlier run left
    writing (placed when it lands: runtime.run.compacting)."""
    return next((c for c in view.compacting.values() if c.background), None)


def _working(view: ConversationView, run: Run) -> str:
    """What a running run is doing besides compacting: a tool, writing, or thinking."""
    running = [
        c.name[:MAX_TOOL_NAME]
        for c in view.tool_calls
        if c.run_id == run.id and c.state == ToolCallState.RUNNING
    ]
    if len(running) > 1:  # reads of one turn run together
        return f"running {len(running)} tools ({', '.join(dict.fromkeys(running))})"
    if running:
        return f"running {running[0]}"
    for entry in reversed(view.settled):
        if entry.run_id != run.id:
            break
        if entry.kind == EntryKind.ASSISTANT and entry.status == EntryStatus.STREAMING:
            return "writing" if len(view.text_of(entry)) else "thinking"
    return "thinking"


def run_state_label(view: ConversationView, retry_in: float | None = None) -> str:
    """Markup for the active run's state (else the latest's); "idle" if none. `retry_in`:
    seconds until a retried request is sent, when the run waits for one."""
    run = view.active_run or (view.runs[-1] if view.runs else None)
    if run is None:
        return "[$foreground-muted]idle[/]"
    tone, label = _STATE.get(RunState(run.state), ("$foreground-muted", run.state))
    limit = BUDGET_NAMES.get(str((run.error or {}).get("code")))
    if run.state == RunState.INTERRUPTED and limit is not None:
        label = f"stopped: {limit}"  # by the run's budget (max_turns, max_cost, time_limit)
    if run.state == RunState.RUNNING and retry_in is not None:
        tone, label = "$warning", f"retrying in {math.ceil(retry_in)} s"
    elif run.state == RunState.RUNNING:
        label = _activity(view, run)
    elif run.terminal and (left := _background_summary(view)) is not None:
        summary = compacting_label(left.entries, left.tokens, left.written)
        label = f"{label} · {summary} in the background"
    glyph = "●" if run.terminal else "◌"
    return f"[{tone}]{glyph} {escape(label)}[/]"


def fields(
    view: ConversationView,
    settings: SessionSettings | None,
    retry_in: float | None,
    catalog: Catalog | None = None,
    jobs: int = 0,
    below: UsageTotals | None = None,
) -> list[Field]:
    model = settings.model if settings else view.conversation.agent.model
    mode = settings.approval_mode if settings else view.conversation.agent.approval_mode
    fields = [Field(0, run_state_label(view, retry_in))]
    fields.append(Field(1, f"[b {_MODE_TONE.get(mode, '$error')}]{escape(mode)}[/]"))
    queued = len(view.queued_inbox)
    if queued:
        fields.append(Field(2, f"[$accent]{queued} queued[/]"))
    if jobs:  # background jobs running (/jobs lists them)
        fields.append(Field(2, f"[$success]{jobs} job{'s' if jobs > 1 else ''}[/]"))
    effort = view.conversation.agent.reasoning_effort
    shown = f"[b $primary]{escape(model or 'no model')}[/]"
    fields.append(Field(3, shown + (f" [$primary]({escape(effort)})[/]" if effort else "")))
    ctx = context_of(view, model, catalog)
    used = f"{'~' if ctx.estimated else ''}{count(ctx.used)}"
    window = f"/{count(ctx.window)} {ctx.percent}%" if ctx.window else ""
    fields.append(Field(4, f"[$foreground-muted]ctx {used}{window}[/]"))
    spent = totals(view)
    if below is not None:  # the subagents' spend: the session's whole work
        spent = Totals(
            spent.input_tokens + below.input_tokens,
            spent.output_tokens + below.output_tokens,
            spent.cost if below.cost is None else (spent.cost or 0.0) + below.cost,
            spent.estimated or str(below.quality) != "measured",
        )
    if spent.tokens or spent.cost is not None:
        mark = "~" if spent.estimated else ""
        text = f"{mark}{count(spent.tokens)} tok"
        if spent.cost is not None:
            text += f" ${spent.cost:.4f}"
        fields.append(Field(5, f"[$foreground-muted]{text}[/]"))
    if view.conversation.id:
        fields.append(Field(6, f"[$foreground-muted]{view.conversation.id[-8:]}[/]"))
    return fields
