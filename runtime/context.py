"""What the model sees: the system prompt and messages built from stored entries.

The model sees entries from the newest reset or summary onward. An assistant
entry that did not complete is left out while its own run is still going (the
run will ask again); one from an ended run is kept as the text it got to, so a
follow-up knows what was already said.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from typing import Any

from runtime.providers.base import ImagePart, Message, TextPart, ToolCall, ToolSpec
from runtime.records import Conversation, Entry, EntryKind, EntryStatus

BASE_PROMPT = """\
You are Bastion, a coding agent working in the user's repository from their terminal.
Work in small, verifiable steps: read before you edit, search instead of guessing,
run the project's own tests or commands to check your work, and say plainly what you
changed and what you could not do. Paths are relative to the workspace root. When a
tool refuses, read its code and hint and take the next move it names. Keep answers
short; use Markdown for code."""


def system_prompt(conversation: Conversation, tools: Sequence[ToolSpec]) -> str:
    parts = [BASE_PROMPT]
    env = [
        f"Workspace root: {conversation.cwd}",
        f"Platform: {platform.system()} {platform.release()}",
        f"Today: {time.strftime('%Y-%m-%d')}",
    ]
    if tools:
        env.append("Tools: " + ", ".join(t.name for t in tools))
    parts.append("\n".join(env))
    instructions = conversation.agent.instructions.strip()
    if instructions:
        parts.append("Instructions from the user:\n" + instructions)
    return "\n\n".join(parts)


def _active_entries(entries: Sequence[Entry]) -> Sequence[Entry]:
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind in (EntryKind.RESET, EntryKind.SUMMARY):
            return entries[i:]
    return entries


def _tool_result_content(entry: Entry) -> str | tuple[TextPart | ImagePart, ...]:
    images: list[dict[str, Any]] = entry.data.get("images") or []
    if not images:
        return entry.text
    parts: list[TextPart | ImagePart] = [TextPart(entry.text)]
    parts.extend(ImagePart(i["media_type"], i["data"]) for i in images)
    return tuple(parts)


def build_messages(
    conversation: Conversation,
    entries: Sequence[Entry],
    current_run_id: str | None,
    tools: Sequence[ToolSpec] = (),
) -> tuple[Message, ...]:
    messages = [Message("system", system_prompt(conversation, tools))]
    for entry in _active_entries(entries):
        match entry.kind:
            case EntryKind.USER:
                messages.append(Message("user", entry.text))
            case EntryKind.SUMMARY:
                messages.append(
                    Message("user", "Summary of the conversation so far:\n" + entry.text)
                )
            case EntryKind.RESET:
                if entry.text:
                    messages.append(Message("user", entry.text))
            case EntryKind.ASSISTANT:
                message = _assistant_message(entry, current_run_id)
                if message is not None:
                    messages.append(message)
            case EntryKind.TOOL_RESULT:
                messages.append(
                    Message(
                        "tool", _tool_result_content(entry), tool_call_id=entry.data["tool_call_id"]
                    )
                )
    return tuple(messages)


def _assistant_message(entry: Entry, current_run_id: str | None) -> Message | None:
    if entry.status == EntryStatus.COMPLETE:
        calls = tuple(
            ToolCall(c["id"], c["name"], c["arguments"]) for c in entry.data.get("tool_calls", ())
        )
        if not entry.text and not calls:
            return None
        return Message("assistant", entry.text, tool_calls=calls)
    if entry.run_id == current_run_id or not entry.text:
        return None
    return Message("assistant", entry.text + "\n\n[this answer was interrupted]")


def arguments_preview(arguments: str, limit: int = 200) -> str:
    """A one-line rendering of a tool call's JSON arguments, for people."""
    try:
        text = json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        text = arguments
    return text if len(text) <= limit else text[: limit - 1] + "…"
