"""The `todo` tool: a short checklist the model keeps and the user sees.

Each call sends the whole list (items with `content` and `status`: pending,
in_progress or done), replacing the one before, as Claude Code's TodoWrite does:
the model never has to patch an item it cannot see. The list is conversation
state, not a workspace file: the tool reads and writes nothing on disk, so it
runs in every approval mode without asking. It is not run alongside other calls
(`ToolInfo.concurrent` is false): two lists in one turn land in the asked order.

Durability: the list is stored (`todos`, one row per conversation) in the
transaction that commits the call's result (`record_todos`, called by
runtime.run.calls.settle_call), and a `todos.updated` event carries it to every
front end. A crash before that commit leaves the previous list and the call
unfinished; it is replay-safe, so the resume runs it again. Compaction keeps
the list in the summary (runtime.context.compaction), so the model still sees its plan
when the turns that wrote it are summarised away.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.model.llm import ToolSpec
from runtime.model.todo import STATUSES, TodoItem, plan_text
from runtime.model.tools import OnStart, ToolboxLayer, ToolInfo, ToolOutcome, invalid_arguments
from runtime.store.todos import TODO_TOOL

if TYPE_CHECKING:
    pass

MAX_ITEMS = 50
MAX_CONTENT = 500  # characters of one item

DESCRIPTION = (
    "Keep a short checklist of the steps of the current task, shown to the user above "
    "the prompt. Send the whole list every time (it replaces the previous one): each "
    "item has `content` (one line, imperative: 'Add the --json flag') and `status` "
    "(pending, in_progress or done). Use it for work of three steps or more: write the "
    "plan first, mark one item in_progress when you start it and done as soon as it is "
    "finished, add items you discover. Skip it for a single quick step."
)


def todo_spec() -> ToolSpec:
    item = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "the step, one line"},
            "status": {"type": "string", "enum": list(STATUSES)},
        },
        "required": ["content", "status"],
        "additionalProperties": False,
    }
    parameters = {
        "type": "object",
        "properties": {"todos": {"type": "array", "items": item, "maxItems": MAX_ITEMS}},
        "required": ["todos"],
        "additionalProperties": False,
    }
    return ToolSpec(TODO_TOOL, DESCRIPTION, parameters)


class BadTodos(ValueError):
    """The arguments are not a list of todo items; the message says what to fix."""


def parse_todos(arguments: str) -> tuple[TodoItem, ...]:
    """The list a `todo` call sends (BadTodos: what is wrong with it, for the model)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        raise BadTodos(f"the arguments are not JSON ({exc})") from exc
    if not isinstance(args, dict) or not isinstance(args.get("todos"), list):
        raise BadTodos('expected {"todos": [{"content": ..., "status": ...}, ...]}')
    raw = args["todos"]
    if len(raw) > MAX_ITEMS:
        raise BadTodos(f"{len(raw)} items; keep the list to {MAX_ITEMS} or fewer")
    items = []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise BadTodos(f"item {i} is not an object")
        content, status = item.get("content"), item.get("status")
        if not isinstance(content, str) or not content.strip():
            raise BadTodos(f"item {i} has no content")
        if status not in STATUSES:
            raise BadTodos(f"item {i} has status {status!r}; use one of {', '.join(STATUSES)}")
        # One line, without control characters (an escape sequence never reaches a terminal).
        line = " ".join("".join(c for c in content if c.isprintable() or c.isspace()).split())
        if not line:
            raise BadTodos(f"item {i} has no content")
        items.append(TodoItem(line[:MAX_CONTENT], status))
    return tuple(items)


def run_todo(arguments: str) -> ToolOutcome:
    try:
        items = parse_todos(arguments)
    except BadTodos as exc:
        return ToolOutcome(
            False,
            f"REFUSED INVALID_ARGUMENT: {exc}.\nhint: send the whole list again, each item "
            "with content and a status of pending, in_progress or done.",
            {"refusal": {"code": "INVALID_ARGUMENT", "message": str(exc)}},
        )
    done = sum(i.status == "done" for i in items)
    text = f"Todo list saved ({done}/{len(items)} done):\n{plan_text(items)}"
    return ToolOutcome(True, text, {"todos": [i.to_dict() for i in items]})


class PlanToolbox(ToolboxLayer):
    """A toolbox with `todo` added to what `inner` offers (which may be none)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self._spec = todo_spec()

    def specs(self) -> tuple[ToolSpec, ...]:
        found: tuple[ToolSpec, ...] = self.inner.specs() if self.inner is not None else ()
        return (*found, self._spec)

    def info(self, name: str) -> ToolInfo | None:
        if name == TODO_TOOL:
            return ToolInfo(read_only=True, replay_safe=True, concurrent=False)
        return self.inner.info(name) if self.inner is not None else None

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        **extra: Any,
    ) -> ToolOutcome:
        if name == TODO_TOOL:
            return run_todo(arguments)
        if self.inner is None:
            return invalid_arguments(name, "no workspace tools are available here")
        result: ToolOutcome = await self.inner.run(name, arguments, on_output, on_start, **extra)
        return result


# --- the stored list -------------------------------------------------------------------
