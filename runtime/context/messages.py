"""What the model sees: the system prompt and messages built from stored entries.

The model sees entries from the newest reset onward, with the newest summary in
place of the entries it covers (runtime.context.compaction). An assistant entry that
did not complete is sent as the text it got to, marked as cut off (CUT_OFF), so
the model knows what was already said:

- from an ended run (interrupted by the user, or failed): the marked text, and
  the next user message follows it as usual;
- from the run being resumed after a crash (issue 25, item 5): the partial the
  dead driver kept, closed as interrupted by recovery, is what the user saw.
  The model gets it marked, then a note (CONTINUE) asking it to go on from where
  the text stops without repeating it. The front ends show the partial as its
  own entry marked interrupted and the continuation as a new entry under it, so
  no text appears twice (before this the partial was left out, the model began
  again and the answer was shown twice);
- a failed attempt of the run in progress (its stream is retried under the same
  entry) and a still-streaming entry are left out: the run is asking again;
- a superseded run's work (its answers, calls and results; runtime.run.redirect) is
  left out, kept in the record. The user's words stay, and where tools were called a
  line says which (DISCARDED): what they changed in the workspace is still changed.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from runtime.context.compaction import CUT_OFF, covered_through, newest_summary
from runtime.context.images import adapt_content
from runtime.context.superseded import without_superseded
from runtime.model.llm import ImagePart, Message, TextPart, ToolCall, ToolSpec
from runtime.model.records import Conversation, Entry, EntryKind, EntryStatus

HANDOFF_HEAD = (
    "[A new context starts here. This is the handoff note you wrote at the end of the "
    "previous one; the conversation before it is not shown to you.]\n\n"
)

CONTINUE = (
    "[Your answer above was cut off when bastion stopped; the user has seen it. "
    "Continue from exactly where it stops. Do not repeat any of it.]"
)

BASE_PROMPT = """\
You are Bastion, a coding agent working in the user's repository from their terminal.
Work in small, verifiable steps: read before you edit, search instead of guessing,
run the project's own tests or commands to check your work, and say plainly what you
changed and what you could not do. Paths are relative to the workspace root. When a
tool refuses, read its code and hint and take the next move it names. Keep answers
short; use Markdown for code."""


PLAN_MODE = (
    "Plan mode: the user wants a plan before any change. Only the reading tools and the "
    "todo tool run; writes and commands are refused. Investigate what you need, write the "
    "plan as a todo list with the todo tool, say what you would do in a few lines, and end "
    "your turn. The user approves the plan to leave plan mode."
)


def system_prompt(
    conversation: Conversation, tools: Sequence[ToolSpec], project: str = "", mode: str = ""
) -> str:
    """The system prompt, most stable part first so providers' prompt caches hit:
    the base prompt, tools and workspace, then the project's instruction files
    (`project`, see runtime.context.instructions), the user's configured instructions,
    and the date last (it is the only part that changes by itself)."""
    parts = [BASE_PROMPT]
    env = []
    if tools:
        env.append("Tools: " + ", ".join(t.name for t in tools))
    env.append(f"Workspace root: {conversation.cwd}")
    # The OS family only: a kernel release says little to a model, names this machine
    # to every provider, and made the prompt (and so token counts) differ by machine.
    env.append(f"Platform: {platform.system()}")
    parts.append("\n".join(env))
    if project.strip():
        parts.append(
            "Project instructions (AGENTS.md files, farthest first; a nearer file and the "
            "user's instructions below take precedence):\n\n" + project.strip()
        )
    instructions = conversation.agent.instructions.strip()
    if instructions:
        parts.append("Instructions from the user:\n" + instructions)
    if mode == "plan":  # (the harness enforces it: runtime.config.approvals.decide)
        parts.append(PLAN_MODE)
    parts.append(f"Today: {today()}")
    return "\n\n".join(parts)


def today() -> str:
    """The date the system prompt gives (the tests pin it: tests/conftest.py)."""
    return time.strftime("%Y-%m-%d")


def _active_entries(entries: Sequence[Entry]) -> Sequence[Entry]:
    """What a request is built from: after the newest reset, the summary in force first,
    then every entry after the last position it covers (runtime.context.compaction);
    a superseded run's work left out."""
    start = 0
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].kind == EntryKind.RESET:
            start = i
            break
    active = without_superseded(entries[start:])
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


class ImagePolicy(msgspec.Struct, frozen=True):
    """How images reach the model: fitted to `max_side`, or placeholders if it takes none.
    `prompt_images` holds the images a user entry names by path (runtime.context.images)."""

    images: bool = True
    max_side: int = 2048
    model: str = ""
    prompt_images: Mapping[str, tuple[ImagePart, ...]] = msgspec.field(default_factory=dict)


def build_messages(
    conversation: Conversation,
    entries: Sequence[Entry],
    current_run_id: str | None,
    tools: Sequence[ToolSpec] = (),
    project: str = "",
    policy: ImagePolicy | None = None,
    mode: str = "",
) -> tuple[Message, ...]:
    """The request's messages. Each assistant message with tool calls is followed by
    exactly one tool message per call, whatever order the entries are in; ids on
    the wire are the provider's, made unique within the request where it repeated one."""
    policy = policy or ImagePolicy()
    active = _active_entries(entries)
    results = {e.data.get("tool_call_id"): e for e in active if e.kind == EntryKind.TOOL_RESULT}
    results.update(_replaced(active, results))
    messages = [Message("system", system_prompt(conversation, tools, project, mode))]
    used: set[str] = set()
    last = {e.run_id: i for i, e in enumerate(active) if e.kind == EntryKind.ASSISTANT}
    # A prompt a UserPromptSubmit hook blocked never reaches the model (runtime.hooks).
    withdrawn = {e.data.get("withdraws") for e in active if e.kind == EntryKind.NOTE}
    for index, entry in enumerate(active):
        match entry.kind:
            case EntryKind.USER if entry.id in withdrawn:
                continue
            case EntryKind.NOTE if entry.data.get("for_model"):  # a hook's feedback
                messages.append(Message("user", str(entry.data["for_model"])))
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
            case EntryKind.RESET if entry.data.get("handoff"):  # runtime.context.handoff
                messages.append(Message("user", HANDOFF_HEAD + entry.text))
            case EntryKind.RESET:
                if entry.text:
                    messages.append(Message("user", entry.text))
            case EntryKind.ASSISTANT:
                went_on = _went_on(active, index, last, current_run_id)
                messages.extend(_assistant_turn(entry, current_run_id, results, used, went_on))
    return tuple(_adapt(m, policy) for m in messages)


def _replaced(active: Sequence[Entry], results: Mapping[Any, Entry]) -> dict[Any, Entry]:
    """Results a PostToolUse hook replaced (runtime.hooks.points): the result as the
    model sees it is the hook's text (the newest replacement); the tool's own result
    entry is kept as it was."""
    out: dict[Any, Entry] = {}
    for entry in active:
        key = entry.data.get("replaces_call") if entry.kind == EntryKind.NOTE else None
        if key is not None and key in results:
            text = str(results[key].data.get("rewritten_note", ""))  # a rewrite stays said
            text += str(entry.data.get("replacement", ""))
            data = {**results[key].data, "images": []}
            out[key] = results[key].but(text=text, data=data)
    return out


def _went_on(
    active: Sequence[Entry], index: int, last: Mapping[str | None, int], run: str | None
) -> bool:
    """Whether the run of active[index] is going on now or answered again after it."""
    entry_run = active[index].run_id
    return entry_run is not None and (entry_run == run or last[entry_run] > index)


def _adapt(message: Message, policy: ImagePolicy) -> Message:
    if isinstance(message.content, str):
        return message
    content = adapt_content(
        message.content, images=policy.images, max_side=policy.max_side, model=policy.model
    )
    return msgspec.structs.replace(message, content=content)


def _wire_id(provider_id: str, key: str, used: set[str]) -> str:
    wire = provider_id or key
    if wire in used:
        wire = f"{wire}_{key.replace('-', '')[-12:]}"
    used.add(wire)
    return wire


def _assistant_turn(
    entry: Entry,
    current_run_id: str | None,
    results: dict[Any, Entry],
    used: set[str],
    went_on: bool,
) -> list[Message]:
    calls = entry.data.get("tool_calls", ()) if entry.status == EntryStatus.COMPLETE else ()
    if not calls:
        return _assistant_messages(entry, current_run_id, went_on)
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


def _assistant_messages(entry: Entry, current_run_id: str | None, went_on: bool) -> list[Message]:
    """An assistant entry without tool calls as the model gets it (module docstring).
    `went_on`: its run is going on now or went on after it (a resume after a crash)."""
    if entry.status == EntryStatus.COMPLETE:
        return [Message("assistant", entry.text)] if entry.text else []
    if not entry.text:
        return []
    cut = Message("assistant", entry.text + "\n\n" + CUT_OFF)
    if entry.status == EntryStatus.INTERRUPTED and went_on:
        return [cut, Message("user", CONTINUE)]  # kept by a crashed driver: its run went on
    return [cut] if entry.run_id != current_run_id else []
