"""An answer to a pending approval, as one transaction: the call approved or denied
(compare-and-set on it still pending), the rules an "always" answer saves, and
the other pending calls those rules now allow."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from runtime.config.rules import allowing, propose
from runtime.config.settings import add_project_rules
from runtime.model.records import Approval, ToolCallRecord, ToolCallState
from runtime.model.rules import BadRule, Rule, Scope
from runtime.store.tx import Tx


class Answer(msgspec.Struct, frozen=True):
    scope: Scope | None  # "always": where the rules go; None: this call only
    message: str | None  # with a denial: what the model is told
    standing: tuple[Rule, ...]  # rules outside the store (invocation, project)
    root: str  # the workspace, for project rules
    sandbox: str | None = None  # approved to run "outside" the sandbox, or with "network"


def answer_tx(
    tx: Tx, call_id: str, approve: bool, answer: Answer
) -> tuple[list[ToolCallRecord], tuple[Rule, ...]]:
    """The calls answered (the asked one first; none if it was not pending) and the
    rules saved. A project rule is written inside the transaction: if the file cannot
    be written, nothing is approved."""
    current = tx.tool_call(call_id)
    if current is None or current.approval != Approval.PENDING:
        return [], ()
    review = dict(current.review or {})
    if answer.message:
        review["message"] = answer.message
    if answer.sandbox and approve:
        review["sandbox"] = answer.sandbox
    saved: tuple[Rule, ...] = ()
    if answer.scope is not None:
        have = [*tx.session_rules(), *answer.standing]
        saved = propose(current.name, current.arguments, answer.scope, have)
        if not saved:
            raise BadRule(
                f"no rule can cover this {current.name} call",
                hint="approve it once (y): a command with $(…), a redirection to a file or "
                "a subshell always asks",
            )
        review["allowed_by"] = [r.to_dict() for r in saved]
    decided = tx.transition_tool_call(
        call_id,
        from_states=(ToolCallState.PENDING,),
        from_approvals=(Approval.PENDING,),
        approval=Approval.APPROVED if approve else Approval.DENIED,
        review=review or None,
    )
    if decided is None:
        return [], ()
    if answer.scope == Scope.SESSION:
        tx.add_session_rules(saved)
    elif answer.scope == Scope.PROJECT:
        add_project_rules(answer.root, saved)
    covered = _approve_covered(tx, saved) if saved else []
    return [decided, *covered], saved


def _approve_covered(tx: Tx, rules: Sequence[Rule]) -> list[ToolCallRecord]:
    out = []
    for call in tx.pending_approvals():
        used = allowing(rules, call.name, call.arguments)
        if not used:
            continue
        review = {**(call.review or {}), "allowed_by": [r.to_dict() for r in used]}
        done = tx.transition_tool_call(
            call.id,
            from_states=(ToolCallState.PENDING,),
            from_approvals=(Approval.PENDING,),
            approval=Approval.APPROVED,
            review=review,
        )
        if done is not None:
            out.append(done)
    return out
