"""What the model sees: the system prompt and messages built from stored entries.

The model sees entries from the newest reset or summary onward. An assistant
entry that did not complete is left out while its own run is still going (the
run will ask again); one from an ended run is kept as the text it got to, so a
follow-up knows what was already said.
"""

from __future__ import annotations

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
    """The request's messages. Each assistant message with tool calls is followed by
    exactly one tool message per call, whatever order the entries are in; ids on
    the wire are the provider's, made unique within the request where it repeated one."""
    active = _active_entries(entries)
    results = {e.data.get("tool_call_id"): e for e in active if e.kind == EntryKind.TOOL_RESULT}
    messages = [Message("system", system_prompt(conversation, tools))]
    used: set[str] = set()
    for entry in active:
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
                messages.extend(_assistant_turn(entry, current_run_id, results, used))
    return tuple(messages)


def _wire_id(provider_id: str, key: str, used: set[str]) -> str:
    wire = provider_id or key
    if wire in used:
        wire = f"{wire}_{key.replace('-', '')[-12:]}"
    used.add(wire)
    return wire


def _assistant_turn(
    entry: Entry, current_run_id: str | None, results: dict[Any, Entry], used: set[str]
) -> list[Message]:
    calls = entry.data.get("tool_calls", ()) if entry.status == EntryStatus.COMPLETE else ()
    if not calls:
        message = _assistant_message(entry, current_run_id)
        return [message] if message is not None else []
    wire_calls, replies = [], []
    for call in calls:
        key = call.get("key") or call["id"]  # entries before own keys: the id was the key
        wire = _wire_id(call["id"], key, used)
        wire_calls.append(ToolCall(wire, call["name"], call["arguments"]))
        result = results.get(key)
        content = (
            _tool_result_content(result)
            if result is not None
            else "INTERRUPTED: no result was recorded for this call; its effects are unknown."
        )
        replies.append(Message("tool", content, tool_call_id=wire))
    return [Message("assistant", entry.text, tool_calls=tuple(wire_calls)), *replies]


def _assistant_message(entry: Entry, current_run_id: str | None) -> Message | None:
    if entry.status == EntryStatus.COMPLETE:
        return Message("assistant", entry.text) if entry.text else None
    if entry.run_id == current_run_id or not entry.text:
        return None
    return Message("assistant", entry.text + "\n\n[this answer was interrupted]")
