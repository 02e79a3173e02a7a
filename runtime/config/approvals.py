"""Approval modes: which tool calls run, which ask, which are refused outright."""

from __future__ import annotations

from enum import StrEnum

from runtime.model.errors import ConfigError


class ApprovalMode(StrEnum):
    READ_ONLY = "read-only"  # only reading tools
    PLAN = "plan"  # only reading tools and the todo list: the model plans, the user approves
    ASK = "ask"  # reads run; writes and commands ask
    AUTO_EDIT = "auto-edit"  # reads and workspace writes run; commands ask
    FULL_AUTO = "full-auto"  # everything runs; path rules still hold

    @classmethod
    def parse(cls, text: str) -> ApprovalMode:
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ConfigError(
                f"unknown approval mode {text!r}", hint=f"use one of: {known}"
            ) from None


class Decision(StrEnum):
    RUN = "run"
    ASK = "ask"
    REFUSE = "refuse"


WRITE_TOOLS = frozenset({"write_file", "edit_file"})


def decide(mode: ApprovalMode, tool: str, read_only: bool) -> Decision:
    if read_only or mode is ApprovalMode.FULL_AUTO:
        return Decision.RUN
    if mode in (ApprovalMode.READ_ONLY, ApprovalMode.PLAN):
        return Decision.REFUSE
    if mode is ApprovalMode.AUTO_EDIT and tool in WRITE_TOOLS:
        return Decision.RUN
    return Decision.ASK


def refusal_text(
    mode: ApprovalMode, tool: str, *, interactive: bool, message: str | None = None
) -> str:
    """What the model is told when a call does not run."""
    if mode is ApprovalMode.PLAN:
        return (
            f"REFUSED FORBIDDEN: {tool} is not allowed in plan mode: nothing is changed "
            "until the user approves a plan.\n"
            "hint: read what you need, write the plan with the todo tool, and end your "
            "turn; the user approves it to leave plan mode."
        )
    if mode is ApprovalMode.READ_ONLY:
        return (
            f"REFUSED FORBIDDEN: {tool} is not allowed in read-only mode.\n"
            "hint: use the reading tools, or tell the user what change you would make."
        )
    if not interactive:
        return (
            f"REFUSED FORBIDDEN: {tool} needs approval and this session cannot ask "
            f"(approval mode {mode.value}, non-interactive).\n"
            "hint: tell the user the change you would make; they can rerun with "
            "--allow 'PREFIX' (commands starting with PREFIX), --approval-mode auto-edit "
            "(edits) or full-auto (edits and commands)."
        )
    if message:
        return (
            # (the message on the first line: a tool row shows that line, and what the
            # user said is the point of it)
            f"REFUSED FORBIDDEN: the user denied {tool} and said: {message}\n"
            "hint: follow what the user said."
        )
    return (
        f"REFUSED FORBIDDEN: the user denied {tool}.\n"
        "hint: ask the user how they want to proceed, or try a different approach."
    )
