"""The approval prompt: `Allow write_file {args}? [y]es / [n]o`, answered from the keyboard.

It shows the first pending approval of the view (approvals are committed
records, so this is just a reading of the store) and posts `Answered`; the
app commits the decision through `Harness.respond`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.markup import escape
from textual.message import Message
from textual.reactive import var
from textual.widgets import Static

from runtime import ConversationView
from runtime.records import Approval, ToolCallRecord, ToolCallState
from runtime.views import arguments_preview

__all__ = ["ApprovalPrompt", "pending_approval"]


def pending_approval(view: ConversationView) -> ToolCallRecord | None:
    """The first tool call waiting for the user's decision, if any."""
    for call in view.tool_calls:
        if call.approval == Approval.PENDING and call.state == ToolCallState.PENDING:
            return call
    return None


class ApprovalPrompt(Horizontal, can_focus=True):
    """One line asking for a decision. Focused while shown, so y and n reach it.

    The question is cut with an ellipsis when it is too long; `[y]es / [n]o` always shows.
    """

    DEFAULT_CSS = """
    ApprovalPrompt {
        height: 1;
        padding: 0 1;
        border-left: outer $warning;
        background: $warning 12%;
        color: $foreground;
        display: none;
    }
    ApprovalPrompt.-shown {
        display: block;
    }
    ApprovalPrompt > #approval-question {
        width: 1fr;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ApprovalPrompt > #approval-keys {
        width: auto;
        padding: 0 0 0 2;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Allow", show=False),
        Binding("n", "answer(False)", "Deny", show=False),
    ]

    shown: var[bool] = var(False, toggle_class="-shown")

    @dataclass
    class Answered(Message):
        tool_call_id: str
        approve: bool

    def __init__(self) -> None:
        super().__init__()
        self.call: ToolCallRecord | None = None
        self._answered: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static(id="approval-question")
        yield Static("[b $warning]\\[y][/]es / [b $warning]\\[n][/]o", id="approval-keys")

    @property
    def question(self) -> str:
        """The question and the keys, as plain text (what the line says)."""
        question = self.query_one("#approval-question", Static).render()
        return f"{question}  {self.query_one('#approval-keys', Static).render()}"

    def show(self, view: ConversationView) -> bool:
        """Show the first pending approval (or hide); true if the call shown changed."""
        call = pending_approval(view)
        if call is not None and call.id in self._answered:
            call = None  # answered; waiting for the decision's event
        changed = (call.id if call else None) != (self.call.id if self.call else None)
        self.call = call
        if changed and call is not None:
            args = escape(arguments_preview(call.arguments, limit=120))
            self.query_one("#approval-question", Static).update(
                f"[b $warning]Allow[/] [b]{escape(call.name)}[/b] [$foreground-muted]{args}[/]"
                "[b $warning]?[/]"
            )
        self.shown = call is not None
        return changed

    def action_answer(self, approve: bool) -> None:
        if self.call is None:
            return
        self._answered.add(self.call.id)
        self.post_message(self.Answered(self.call.id, approve))
        self.call = None
        self.shown = False
