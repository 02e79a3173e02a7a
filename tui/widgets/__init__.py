"""The Textual app's widgets. Each renders from the ConversationView the one reducer produced.

Each name is imported from its module on first use (PEP 562), so importing one
widget does not load the others: the first frame needs only the transcript, the
prompt and the status bar (see tui.launch).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.widgets.approval import ApprovalPrompt, pending_approval
    from tui.widgets.command_panel import CommandHints, CommandOutput
    from tui.widgets.entries import AssistantEntry, NoteEntry, ToolCallLine, UserEntry
    from tui.widgets.inbox import InboxStrip
    from tui.widgets.prompt import PromptInput
    from tui.widgets.status import StatusBar
    from tui.widgets.transcript import Transcript

_HOMES = {
    "ApprovalPrompt": "approval",
    "pending_approval": "approval",
    "CommandHints": "command_panel",
    "CommandOutput": "command_panel",
    "InboxStrip": "inbox",
    "PromptInput": "prompt",
    "StatusBar": "status",
    "AssistantEntry": "entries",
    "NoteEntry": "entries",
    "ToolCallLine": "entries",
    "UserEntry": "entries",
    "Transcript": "transcript",
}

__all__ = [
    "ApprovalPrompt",
    "AssistantEntry",
    "CommandHints",
    "CommandOutput",
    "InboxStrip",
    "NoteEntry",
    "PromptInput",
    "StatusBar",
    "ToolCallLine",
    "Transcript",
    "UserEntry",
    "pending_approval",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tui.widgets' has no attribute {name!r}")
    return getattr(import_module(f"tui.widgets.{home}"), name)
