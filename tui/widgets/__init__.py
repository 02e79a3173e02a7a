"""The Textual app's widgets. Each renders from the ConversationView the one reducer produced."""

from tui.widgets.approval import ApprovalPrompt, pending_approval
from tui.widgets.command_panel import CommandHints, CommandOutput
from tui.widgets.inbox import InboxStrip
from tui.widgets.prompt import PromptInput
from tui.widgets.status import StatusBar
from tui.widgets.transcript import AssistantEntry, NoteEntry, ToolCallLine, Transcript, UserEntry

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
