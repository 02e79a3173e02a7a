"""The Textual app's widgets. Each renders from the ConversationView the one reducer produced."""

from tui.widgets.approval import ApprovalPrompt, pending_approval
from tui.widgets.prompt import PromptInput
from tui.widgets.status import InboxStrip, StatusBar
from tui.widgets.transcript import AssistantEntry, NoteEntry, ToolCallLine, Transcript, UserEntry

__all__ = [
    "ApprovalPrompt",
    "AssistantEntry",
    "InboxStrip",
    "NoteEntry",
    "PromptInput",
    "StatusBar",
    "ToolCallLine",
    "Transcript",
    "UserEntry",
    "pending_approval",
]
