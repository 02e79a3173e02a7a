"""A request's messages as a PreRequest hook sees them, and the messages a hook's
answer puts in their place.

On stdin (`shown`): every message but the system prompt, oldest first, each
`{"role", "content"}` (text; an image is the placeholder `[image: TYPE]`), an
assistant's `tool_calls` (`id`, `name`, `arguments` as the raw JSON text) and a tool
result's `tool_call_id`. A content or arguments text longer than MESSAGE_CHARS is
cut with a note; once the messages passed STDIN_CHARS, the older ones are left out
(`messages_omitted` says how many).

In the answer (`replacement`): `hookSpecificOutput.messages`, a list of such
messages with roles user, assistant and tool only. A message returned exactly as it
was given is the original (whole, with its images and what was cut); any other is
sent as the hook wrote it. The system prompt and the messages left out stay in
front; the tools offered are the request's own. Anything malformed is a problem
(one line) and the request goes as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from runtime.model.llm import ContentPart, ImagePart, Message, ModelRequest, ToolCall

MESSAGE_CHARS = 16_000  # characters of one content (or arguments) text given to a hook
STDIN_CHARS = 1_000_000  # characters of messages given to a hook, newest first
MAX_MESSAGES = 10_000  # messages a replacement may hold
_ROLES = ("user", "assistant", "tool")
_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


class Shown(msgspec.Struct, frozen=True):
    """What a hook is given of `request`: the messages as dicts, how many of the oldest
    were left out, and which original each shown message is (by its canonical JSON)."""

    request: ModelRequest
    messages: list[dict[str, Any]]
    omitted: int
    originals: dict[str, list[Message]]  # identical ones in order: each kept its own

    def payload(self) -> dict[str, Any]:
        """The PreRequest fields of stdin."""
        out: dict[str, Any] = {
            "model": self.request.model,
            "tools": [t.name for t in self.request.tools],
            "messages": self.messages,
        }
        if self.omitted:
            out["messages_omitted"] = self.omitted
            out["messages_note"] = (
                f"the {self.omitted} oldest messages are left out (the messages are over "
                f"{STDIN_CHARS} characters); a replacement replaces only the messages given, "
                "and those stay before it"
            )
        return out


def shown(request: ModelRequest) -> Shown:
    """`request`'s messages as a hook sees them (the module docstring)."""
    rest = [m for m in request.messages if m.role != "system"]
    messages: list[dict[str, Any]] = []
    originals: dict[str, list[Message]] = {}
    used = 0
    kept = 0
    for message in reversed(rest):
        item = _dict(message)
        size = len(json.dumps(item, ensure_ascii=False))
        if messages and used + size > STDIN_CHARS:
            break
        used += size
        kept += 1
        messages.append(item)
        originals.setdefault(_key(item), []).insert(0, message)
    messages.reverse()
    return Shown(request, messages, len(rest) - kept, originals)


def replacement(found: Shown, answer: Any) -> ModelRequest | str:
    """The request with the hook's messages in place of those it was given, or a problem
    (a short phrase) when `answer` is not a list of messages that can be sent."""
    if not isinstance(answer, list) or not answer:
        return "messages must be a non-empty list of {role, content} objects"
    if len(answer) > MAX_MESSAGES:
        return f"more than {MAX_MESSAGES} messages"
    made: list[Message] = []
    asked: set[str] = set()
    used: dict[str, int] = {}
    rest = [m for m in found.request.messages if m.role != "system"]
    for earlier in rest[: found.omitted]:
        asked.update(c.id for c in earlier.tool_calls)
    for i, item in enumerate(answer):
        message = _original(found, item, used)
        if message is None:
            message_or_problem = _message(item)
            if isinstance(message_or_problem, str):
                return f"message {i}: {message_or_problem}"
            message = message_or_problem
        if message.role == "tool" and message.tool_call_id not in asked:
            return f"message {i}: a tool result whose tool_call_id no earlier tool call has"
        asked.update(c.id for c in message.tool_calls)
        made.append(message)
    system = tuple(m for m in found.request.messages if m.role == "system")
    return msgspec.structs.replace(found.request, messages=(*system, *rest[: found.omitted], *made))


def _original(found: Shown, item: Any, used: dict[str, int]) -> Message | None:
    """The original of a message a hook returned as it was given (the first of identical
    ones not returned yet), or None."""
    key = _key(item)
    same = found.originals.get(key, [])
    at = used.get(key, 0)
    if at < len(same):
        used[key] = at + 1
        return same[at]
    return same[-1] if same else None


def _message(item: Any) -> Message | str:
    if not isinstance(item, dict):
        return "not a JSON object"
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        return f"unknown key {unknown[0]!r} (a message has role, content, tool_calls, tool_call_id)"
    role = item.get("role")
    if role == "system":
        return "a system message (a PreRequest hook cannot change or add to the system prompt)"
    if role not in _ROLES:
        return f"role {role!r} (use user, assistant or tool)"
    content = item.get("content", "")
    if not isinstance(content, str):
        return "content must be a string"
    calls = item.get("tool_calls", [])
    if not isinstance(calls, list) or (calls and role != "assistant"):
        return "tool_calls must be a list, and only an assistant message has them"
    made = []
    for call in calls:
        if not (isinstance(call, dict) and _strings(call, "id", "name")):
            return "each tool call needs an id and a name (strings)"
        arguments = call.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        made.append(ToolCall(call["id"], call["name"], arguments))
    call_id = item.get("tool_call_id")
    if (role == "tool") != isinstance(call_id, str):
        return "a tool message needs a tool_call_id (a string), and only a tool message has one"
    return Message(role, content, tuple(made), call_id)


def _strings(item: dict[str, Any], *keys: str) -> bool:
    return all(isinstance(item.get(k), str) and item[k] for k in keys)


def _dict(message: Message) -> dict[str, Any]:
    item: dict[str, Any] = {"role": message.role, "content": _cut(_text(message.content))}
    if message.tool_calls:
        item["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": _cut(c.arguments)} for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        item["tool_call_id"] = message.tool_call_id
    return item


def _text(content: str | Sequence[ContentPart]) -> str:
    if isinstance(content, str):
        return content
    parts = [f"[image: {p.media_type}]" if isinstance(p, ImagePart) else p.text for p in content]
    return "\n".join(parts)


def _cut(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    more = len(text) - MESSAGE_CHARS
    return (
        text[:MESSAGE_CHARS] + f"\n[bastion: {more} more characters are not shown to hooks; "
        "return this message unchanged to send it whole]"
    )


def _key(item: Any) -> str:
    return json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)
