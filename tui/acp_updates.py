"""What an editor is told of a conversation: ACP `session/update`s made from its view.

`Mirror` follows one `ConversationView` (the reducer's, as every front end's) and
says what changed since it last looked, as the Agent Client Protocol's updates:

    user entry                     user_message_chunk (replayed, or typed elsewhere)
    answer text / reasoning        agent_message_chunk / agent_thought_chunk (the new part)
    tool call                      tool_call when first seen (pending / in_progress, a
                                   title from `call_summary`, a kind, the file it touches,
                                   a write's or edit's text as a diff), then
                                   tool_call_update as it runs and ends (completed /
                                   failed, with the result's text)
    todo list                      plan

It remembers what it sent by id (characters of each text, each call's last status),
never a copy of the transcript, so a fresh view (a snapshot after a resync) sends
nothing twice; replaying a stored session is the same walk from nothing sent. Every
text goes out through `visible`, as on every other front end: a model's, a command's
or a repository's control characters are shown, never handed to the editor raw.

`prompt_text` goes the other way: the content blocks of a `session/prompt` as the
text bastion submits (resource links to files in the workspace become `@path`
mentions, attached as the app attaches them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from acp import (
    plan_entry,
    resource_link_block,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AudioContentBlock,
    AvailableCommandsUpdate,
    ContentToolCallContent,
    CurrentModeUpdate,
    EmbeddedResourceContentBlock,
    FileEditToolCallContent,
    ImageContentBlock,
    PlanEntryStatus,
    ResourceContentBlock,
    TerminalToolCallContent,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UserMessageChunk,
)

from runtime import ConversationView, TodoItem, split_attachments, visible
from runtime.model.records import Entry, EntryKind, EntryStatus, ToolCallRecord, ToolCallState
from runtime.model.views import call_summary

__all__ = ["Mirror", "PromptBlock", "Update", "prompt_text", "tool_kind"]

Update = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | CurrentModeUpdate
    | AvailableCommandsUpdate
)
PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
Content = ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent

#: Each built-in tool's ACP kind (the editor's icon); any other (MCP, `task`) is "other".
KINDS: Final[dict[str, ToolKind]] = {
    "read_file": "read",
    "read_output": "read",
    "list_directory": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "run_command": "execute",
    "glob": "search",
    "search_files": "search",
    "todo": "think",
}
_PLAN_STATUS: Final[dict[str, PlanEntryStatus]] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "done": "completed",
}
_SETTLED_CALLS: Final = (ToolCallState.DONE, ToolCallState.DENIED, ToolCallState.INTERRUPTED)
RETRY_NOTE: Final = "\n\n(the model request is sent again: the answer starts over)\n\n"


def tool_kind(name: str) -> ToolKind:
    return KINDS.get(name, "other")


def tool_status(call: ToolCallRecord) -> ToolCallStatus:
    """pending (waiting, for approval or its turn), in_progress, completed, or failed
    (refused, denied, interrupted, or a tool that reported an error)."""
    if call.state == ToolCallState.RUNNING:
        return "in_progress"
    if call.state == ToolCallState.DONE:
        ok = (call.result or {}).get("ok", True)
        return "completed" if ok and not (call.result or {}).get("refusal") else "failed"
    if call.state in _SETTLED_CALLS:
        return "failed"
    return "pending"


def _arguments(call: ToolCallRecord) -> dict[str, Any]:
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _title(call: ToolCallRecord) -> str:
    return visible(f"{call.name} {call_summary(call.name, call.arguments)}", lines=False)


def _within(cwd: str, path: object) -> str | None:
    """`path` (an argument, relative to the workspace) as the absolute path an editor
    opens; None for what is not a plain relative path."""
    if not isinstance(path, str) or not path or os.path.isabs(path) or "\x00" in path:
        return None
    return os.path.normpath(os.path.join(cwd, path))


def _locations(call: ToolCallRecord, cwd: str) -> list[ToolCallLocation] | None:
    where = _within(cwd, _arguments(call).get("path"))
    return [ToolCallLocation(path=where)] if where is not None else None


def _proposal(call: ToolCallRecord, cwd: str) -> list[Content]:
    """A write's or an edit's text as the diff an editor shows (the whole new file of
    a write; the snippet replaced and its replacement of an edit)."""
    args = _arguments(call)
    where = _within(cwd, args.get("path"))
    if where is None:
        return []
    new, old = args.get("content" if call.name == "write_file" else "new_text"), None
    if call.name == "edit_file":
        old = args.get("old_text")
        old = visible(old) if isinstance(old, str) else None
    elif call.name != "write_file":
        return []
    if not isinstance(new, str):
        return []
    return [tool_diff_content(where, visible(new), old)]


def permission_call(call: ToolCallRecord, cwd: str, label: str = "") -> ToolCallUpdate:
    """The call a `session/request_permission` is about (a subagent's named by `label`)."""
    title = _title(call)
    return ToolCallUpdate(
        tool_call_id=call.id,
        title=f"{visible(label, lines=False)}: {title}" if label else title,
        kind=tool_kind(call.name),
        status="pending",
        content=_proposal(call, cwd) or None,
        locations=_locations(call, cwd),
        raw_input=_arguments(call),
    )


class Mirror:
    """What an editor has been told of one conversation, and what to tell it next."""

    def __init__(self) -> None:
        self.text: dict[str, int] = {}  # entry id -> characters of its text sent
        self.thought: dict[str, int] = {}  # entry id -> characters of its reasoning sent
        #: call id -> (status, settled) as last sent; settled: ended, its result sent
        self.calls: dict[str, tuple[str, bool]] = {}
        self.todos: tuple[TodoItem, ...] = ()  # the todo list as last sent
        #: Inbox ids of the prompts this editor sent: their user entries are its own
        #: words, not echoed back (a prompt typed at `bastion attach` is).
        self.typed: set[str] = set()
        self._first = 0  # view.settled[:_first]: sent whole and closed
        self._first_call = 0  # view.tool_calls[:_first_call]: sent settled

    def rewind(self) -> None:
        """A new view (a snapshot): walk it from the start (nothing is sent twice)."""
        self._first = self._first_call = 0

    def restart(self, entry_ids: Iterable[str]) -> list[Update]:
        """Answers whose model request is sent again (attempt reset): what was sent of
        them stays on the editor's screen, so a line says the answer starts over."""
        out: list[Update] = []
        for entry_id in entry_ids:
            if self.text.get(entry_id):
                out.append(update_agent_message_text(RETRY_NOTE))
            self.text[entry_id] = 0
            self.thought[entry_id] = 0
        return out

    def updates(self, view: ConversationView) -> list[Update]:
        """Everything that changed in `view` since the last call, in transcript order
        (an answer's calls right after it), then the todo list if it changed."""
        cwd = view.conversation.cwd
        calls = view.tool_calls
        by_entry: dict[str, list[ToolCallRecord]] = {}
        for call in calls[self._first_call :]:
            by_entry.setdefault(call.entry_id, []).append(call)
        out: list[Update] = []
        settled = view.settled
        first = self._first
        for at in range(first, len(settled)):
            entry = settled[at]
            done = self._entry(view, entry, out)
            for call in by_entry.pop(entry.id, ()):
                self._call(view, call, cwd, out)
            if done and at == first:
                first += 1
        for rest in by_entry.values():  # calls of answers settled before (or of none here)
            for call in rest:
                self._call(view, call, cwd, out)
        self._first = first
        while self._first_call < len(calls) and self._settled(calls[self._first_call]):
            self._first_call += 1
        if view.todos != self.todos:
            self.todos = view.todos
            out.append(
                update_plan(
                    plan_entry(
                        visible(item.content, lines=False),
                        status=_PLAN_STATUS.get(item.status, "pending"),
                    )
                    for item in view.todos
                )
            )
        return out

    # --- entries ---------------------------------------------------------------------

    def _entry(self, view: ConversationView, entry: Entry, out: list[Update]) -> bool:
        """Add what is new of `entry` to `out`; True when nothing more will come of it."""
        if entry.kind == EntryKind.USER:
            if entry.id not in self.text:
                self.text[entry.id] = len(entry.text)
                if entry.data.get("inbox_id") not in self.typed:
                    out.extend(_user_chunks(entry.text, view.conversation.cwd))
            return True
        if entry.kind != EntryKind.ASSISTANT:
            return True  # (summaries, notes and results: a result goes with its call)
        streaming = entry.status == EntryStatus.STREAMING
        self._reasoning(view, entry, streaming, out)
        text = view.text_of(entry)
        sent, end = self.text.get(entry.id, 0), len(text)
        if streaming and end > sent and text.slice(end - 1, end) == "\r":
            end -= 1  # (a CR held back: with the next chunk's LF it is one line end)
        if end > sent:
            out.append(update_agent_message_text(visible(text.slice(sent, end))))
            self.text[entry.id] = end
        return not streaming and self.text.get(entry.id, 0) >= len(text)

    def _reasoning(
        self, view: ConversationView, entry: Entry, streaming: bool, out: list[Update]
    ) -> None:
        live = view.reasoning.get(entry.id)
        if live is not None:
            thought = live.slice(self.thought.get(entry.id, 0))
        elif not streaming and isinstance(entry.data.get("reasoning"), str):
            thought = entry.data["reasoning"][self.thought.get(entry.id, 0) :]
        else:
            return
        if thought:
            out.append(update_agent_thought_text(visible(thought)))
            self.thought[entry.id] = self.thought.get(entry.id, 0) + len(thought)

    # --- tool calls ------------------------------------------------------------------

    def _settled(self, call: ToolCallRecord) -> bool:
        return call.state in _SETTLED_CALLS and self.calls.get(call.id, ("", False))[1]

    def _call(
        self, view: ConversationView, call: ToolCallRecord, cwd: str, out: list[Update]
    ) -> None:
        status = tool_status(call)
        result = view.entry(call.result_entry_id) if call.result_entry_id else None
        settled = call.state in _SETTLED_CALLS
        key = (status, settled and (result is not None or call.result_entry_id is None))
        before = self.calls.get(call.id)
        if before == key:
            return
        self.calls[call.id] = key
        content: list[Content] = _proposal(call, cwd)
        if result is not None and result.text:
            content.append(tool_content(text_block(visible(result.text))))
        if before is None:
            out.append(
                start_tool_call(
                    call.id,
                    _title(call),
                    kind=tool_kind(call.name),
                    status=status,
                    content=content or None,
                    locations=_locations(call, cwd),
                    raw_input=_arguments(call),
                )
            )
        else:
            out.append(update_tool_call(call.id, status=status, content=content or None))


def _user_chunks(text: str, cwd: str) -> list[Update]:
    """A user entry as the editor shows a prompt: its words, then a link to each file
    it attached (not the files' text again)."""
    prompt, attachments = split_attachments(text)
    out: list[Update] = [update_user_message(text_block(visible(prompt)))]
    for attachment in attachments:
        where = _within(cwd, attachment.path)
        if where is not None:
            name = visible(attachment.path, lines=False)
            out.append(update_user_message(resource_link_block(name, _file_uri(where))))
    return out


def _file_uri(path: str) -> str:
    return Path(path).as_uri()


# --- prompts -------------------------------------------------------------------------


def prompt_text(blocks: Sequence[PromptBlock], cwd: str) -> tuple[str, list[str]]:
    """The text to submit for a prompt's content blocks, and a note for each block left
    out. Text is joined as it is; a resource link to a file in the workspace becomes an
    `@path` mention (attached on submit, read as `read_file` reads); an embedded text
    resource follows the prompt; an image, audio or a binary resource is left out."""
    parts: list[str] = []
    context: list[str] = []
    skipped: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(_spaced(parts, _mention(block.uri, cwd)))
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            uri = block.resource.uri.replace('"', "%22")
            context.append(f'<resource uri="{uri}">\n{block.resource.text}\n</resource>')
        else:
            skipped.append(f"the prompt's {block.type} was left out (bastion takes text and files)")
    text = "".join(parts)
    if context:
        text = text.rstrip("\n") + "\n\n" + "\n\n".join(context)
    return text, skipped


def _spaced(parts: list[str], mention: str) -> str:
    """`mention` with a space before it when the text before ends in a word (a mention
    is one only after whitespace) and one after it."""
    before = parts[-1][-1:] if parts else ""
    return (" " if before and not before.isspace() else "") + mention + " "


def _mention(uri: str, cwd: str) -> str:
    """`@path` for a `file:` URI inside the workspace; the URI itself for anything else."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return uri
    path = unquote(parsed.path)
    relative = os.path.relpath(path, cwd) if os.path.isabs(path) else path
    if relative.startswith("..") or os.path.isabs(relative) or '"' in relative or "\n" in relative:
        return uri
    return f'@"{relative}"' if any(c.isspace() for c in relative) else f"@{relative}"
