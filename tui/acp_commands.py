"""The context commands in `bastion acp`: an editor's prompt whose text is `/supersede
[MESSAGE]`, `/urgent MESSAGE` or `/reset [INSTRUCTIONS]` does what the app's command of
that name does (tui.slash_context), through the same protocol ops; the session
advertises them to the editor (`available_commands_update`) when it starts. Each says
in one agent message line what it did; a refusal is the JSON-RPC error of its typed
error, as any prompt's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from acp.helpers import update_agent_message_text, update_available_commands
from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    UnstructuredCommandInput,
)

from runtime import HarnessClient
from runtime.model.records import InboxItem, InboxMode, InboxState
from tui.acp_updates import Update

__all__ = ["ContextCommand", "advertised", "apply", "parse"]

_COMMAND = re.compile(r"/(supersede|urgent|reset)(?:\s+(.*))?", re.DOTALL)

_ABOUT = {
    "supersede": ("end the run; drop its unfinished answer from the context", "message"),
    "urgent": ("stop the run after this step and run the message next", "message"),
    "reset": ("new context from the model's handoff note", "instructions"),
}


@dataclass(frozen=True, slots=True)
class ContextCommand:
    name: str
    arg: str


def parse(text: str) -> ContextCommand | None:
    found = _COMMAND.fullmatch(text.strip())
    return ContextCommand(found[1], (found[2] or "").strip()) if found else None


def advertised() -> Update:
    update: AvailableCommandsUpdate = update_available_commands(
        [
            AvailableCommand(
                name=name,
                description=about,
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)),
            )
            for name, (about, hint) in _ABOUT.items()
        ]
    )
    return update


async def apply(
    harness: HarnessClient, conversation_id: str, command: ContextCommand
) -> tuple[InboxItem | None, Update]:
    """Do `command`: the item whose run the prompt then waits for (None: nothing to wait
    for) and the line that says what was done. A refusal raises its BastionError."""
    match command.name:
        case "supersede":
            done = await harness.supersede(conversation_id, command.arg or None)
            line = "superseded: the unfinished answer and its work are left out of the context"
            return done.item, update_agent_message_text(line + "\n\n")
        case "urgent":
            item = await harness.submit(conversation_id, command.arg, mode=InboxMode.INTERRUPT_NEXT)
            line = (
                "urgent: the run stops after its current step; this runs next"
                if item.state == InboxState.QUEUED
                else "sent: nothing was running"
            )
            return item, update_agent_message_text(line + "\n\n")
        case _:
            entry = await harness.reset(conversation_id, command.arg or None)
            words = len(entry.text.split())
            line = f"reset: a new context starts from the model's handoff note ({words} words)"
            return None, update_agent_message_text(line + "\n\n")
