"""What the model sees: the system prompt and messages built from stored entries.

The model sees entries from the newest reset onward, with the newest summary in
place of the entries it covers (runtime.compaction). An assistant
entry that did not complete is left out while its own run is still going (the
run will ask again); one from an ended run is kept as the text it got to, so a
follow-up knows what was already said.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runtime.compaction import covered_through, newest_summary
from runtime.images import adapt_content
from runtime.providers.base import ImagePart, Message, TextPart, ToolCall, ToolSpec
from runtime.records import Conversation, Entry, EntryKind, EntryStatus

BASE_PROMPT = """\
You are Bastion, a coding agent working in the user's repository from their terminal.
Work in small, verifiable steps: read before you edit, search instead of guessing,
run the project's own tests or commands to check your work, and say plainly what you
changed and what you could not do. Paths are relative to the workspace root. When a
tool refuses, read its code and hint and take the next move it names. Keep answers
short; use Markdown for code."""


def system_prompt(conversation: Conversation, tools: Sequence[ToolSpec], project: str = "") -> str:
    """The system prompt, most stable part first so providers' prompt caches hit:
    the base prompt, tools and workspace, then the project's instruction files
    (`project`, see runtime.instructions), the user's configured instructions,
    and the date last (it is the only part that changes by itself)."""
    parts = [BASE_PROMPT]
    env = []
    if tools:
        env.append("Tools: " + ", ".join(t.name for t in tools))
    env.append(f"Workspace root: {conversation.cwd}")
    env.append(f"Platform: {platform.system()} {platform.release()}")
    parts.append("\n".join(env))
    if project.strip():
        parts.append(
            "Project instructions (AGENTS.md files, farthest first; a nearer file and the "
            "user's instructions below take precedence):\n\n" + project.strip()
        )
    instructions = conversation.agent.instructions.strip()
    if instructions:
        parts.append("Instructions from the user:\n" + instructions)
    parts.append(f"Today: {time.strftime('%Y-%m-%d')}")
    return "\n\n".join(parts)


def _active_entries(entries: Sequence[Entry]) -> Sequence[Entry]:
    """What a request is built from: after the newest reset, the summary in force first,
    then every entry after the last position it covers (runtime.compaction)."""
    start = 0
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == EntryKind.RESET:
            start = i
            break
    active = entries[start:]
    summary = newest_summary(active)
    if summary is None:
        return active
    through = covered_through(summary)
    rest = [e for e in active if e.position > through and e.kind != EntryKind.SUMMARY]
    return [summary, *rest]


def _tool_result_content(entry: Entry) -> str | tuple[TextPart | ImagePart, ...]:
    images: list[dict[str, Any]] = entry.data.get("images") or []
    if not images:
        return entry.text
    parts: list[TextPart | ImagePart] = [TextPart(entry.text)]
    parts.extend(ImagePart(i["media_type"], i["data"]) for i in images)
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class ImagePolicy:
    """How images reach the model: fitted to `max_side`, or placeholders if it takes none.
    `prompt_images` holds the images a user entry names by path (runtime.images)."""

    images: bool = True
    max_side: int = 2048
    model: str = ""
    prompt_images: Mapping[str, tuple[ImagePart, ...]] = field(default_factory=dict)


def build_messages(
    conversation: Conversation,
    entries: Sequence[Entry],
    current_run_id: str | None,
    tools: Sequence[ToolSpec] = (),
    project: str = "",
    policy: ImagePolicy | None = None,
) -> tuple[Message, ...]:
    """The request's messages. Each assistant message with tool calls is followed by
    exactly one tool message per call, whatever order the entries are in; ids on
    the wire are the provider's, made unique within the request where it repeated one."""
    policy = policy or ImagePolicy()
    active = _active_entries(entries)
    results = {e.data.get("tool_call_id"): e for e in active if e.kind == EntryKind.TOOL_RESULT}
    messages = [Message("system", system_prompt(conversation, tools, project))]
    used: set[str] = set()
    for entry in active:
        match entry.kind:
            case EntryKind.USER:
                attached = policy.prompt_images.get(entry.id)
                if attached:
                    messages.append(Message("user", (TextPart(entry.text), *attached)))
                else:
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
    return tuple(_adapt(m, policy) for m in messages)


def _adapt(message: Message, policy: ImagePolicy) -> Message:
    if isinstance(message.content, str):
        return message
    content = adapt_content(
        message.content, images=policy.images, max_side=policy.max_side, model=policy.model
    )
    return replace(message, content=content)


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
    thought = entry.data.get("reasoning"), entry.data.get("reasoning_signature")
    reasoning = (str(thought[0]), str(thought[1])) if thought[0] and thought[1] else None
    message = Message("assistant", entry.text, tool_calls=tuple(wire_calls), reasoning=reasoning)
    return [message, *replies]


def _assistant_message(entry: Entry, current_run_id: str | None) -> Message | None:
    if entry.status == EntryStatus.COMPLETE:
        return Message("assistant", entry.text) if entry.text else None
    if entry.run_id == current_run_id or not entry.text:
        return None
    return Message("assistant", entry.text + "\n\n[this answer was interrupted]")
