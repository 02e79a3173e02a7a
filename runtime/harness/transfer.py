"""Export and import of a conversation.

JSON (`FORMAT`, version `FORMAT_VERSION`): the conversation, its entries, runs
and tool calls as stored, and its ledger events; `bastion import` reads it back
under a new id (`parse_document` validates everything before anything is
written). Markdown is for people: tool calls folded in `<details>` with their
results, edits as ```diff blocks, compacted history marked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runtime.config.safe_read import MAX_DEPTH, check_depth
from runtime.context.compaction import compacted_through
from runtime.model.errors import BastionError, ConfigError, UnknownConversation
from runtime.model.events import DurableEvent, event_to_dict
from runtime.model.ids import parse_uuid
from runtime.model.records import (
    Conversation,
    Entry,
    EntryKind,
    EntryStatus,
    Run,
    RunState,
    ToolCallRecord,
    ToolCallState,
    superseded_runs,
)
from runtime.model.todo import plan_text
from runtime.model.views import ConversationView
from runtime.store.sessions import History
from runtime.store.surrogates import mend_tree

if TYPE_CHECKING:
    from runtime.store.dialect import Db


FORMAT = "bastion.conversation"
FORMAT_VERSION = 1


class ImportRefused(BastionError):
    """An export file that cannot be imported (malformed, or from a newer bastion)."""

    code = "import_refused"


# --- JSON ---------------------------------------------------------------------------


def export_document(view: ConversationView, events: list[DurableEvent]) -> dict[str, Any]:
    conv = view.conversation
    through = compacted_through(view.entries)
    gone = superseded_runs(view.entries)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "conversation": {
            "id": conv.id,
            "title": conv.title,
            "cwd": conv.cwd,
            "settings": conv.settings,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "version": conv.version,
            "parent_id": conv.parent_id,
            "fork_seq": conv.fork_seq,
        },
        "entries": [_entry(e, through, gone) for e in view.entries],
        "runs": [_drop(r.to_dict(), "conversation_id") for r in view.runs],
        "tool_calls": [_drop(c.to_dict(), "conversation_id", "process") for c in view.tool_calls],
        "todos": [item.to_dict() for item in view.todos],  # the model's plan as it stands
        "ledger": [event_to_dict(e) for e in events],
    }


def export_with(db: Db, view: ConversationView) -> dict[str, Any]:
    """The export document of `view`'s conversation: its ledger and its subagents'
    conversations (each a document of its own with the call that started it; an
    import reads the parent's document only) read from `db` in one transaction."""
    from runtime.store import ledger

    conversation_id = view.conversation.id
    events: list[DurableEvent] = []
    while batch := ledger.read(db, conversation_id, events[-1].version if events else 0, 10_000):
        events += batch
    doc = export_document(view, events)
    if db.execute(_HAS_CHILDREN, (conversation_id,)).fetchone() is not None:
        from runtime.agents.children import children_of  # (the agents load only for them)

        doc["children"] = [
            {**committed_export(db, link.conversation.id), "task_call_id": link.call_id}
            for link in children_of(db, conversation_id)
        ]
    return doc


_HAS_CHILDREN = "SELECT 1 FROM conversations WHERE task_parent_id = ? LIMIT 1"


def committed_view(db: Db, conversation_id: str) -> ConversationView:
    """The conversation as committed (what a process driving none of it sees)."""
    from runtime.model.views import view_from_snapshot
    from runtime.store.database import read_snapshot

    snap = read_snapshot(db, conversation_id)
    if snap is None:
        raise UnknownConversation(
            f"no conversation {conversation_id}", hint="list them with `bastion sessions`"
        )
    return view_from_snapshot(snap)


def committed_export(db: Db, conversation_id: str) -> dict[str, Any]:
    """`Harness.export` of a conversation no process here drives, from `db` alone:
    `bastion export` reads it so on a read-only connection, without the harness."""
    return export_with(db, committed_view(db, conversation_id))


def _drop(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def _entry(entry: Entry, through: int = 0, gone: frozenset[str] = frozenset()) -> dict[str, Any]:
    out = _drop(entry.to_dict(), "conversation_id")
    # Summarised by a compaction: kept here, sent to the model as the summary.
    out["compacted"] = entry.position <= through and entry.kind != EntryKind.SUMMARY
    # The work of a superseded run: kept here, never sent to the model again.
    out["superseded"] = entry.run_id in gone and entry.kind in _WORK
    # Convenience fields that earlier exports had at the top level.
    if entry.kind == EntryKind.ASSISTANT:
        out["tool_calls"] = entry.data.get("tool_calls", [])
        if entry.data.get("reasoning"):
            out["reasoning"] = entry.data["reasoning"]
    elif entry.kind == EntryKind.TOOL_RESULT:
        out.update(
            tool_call_id=entry.data.get("tool_call_id"),
            name=entry.data.get("name"),
            ok=entry.data.get("ok"),
        )
    return out


def parse_document(text: str, new_id: str, now: float, *, cwd: str) -> tuple[Conversation, History]:
    """The conversation (under `new_id`, working in `cwd`) and the history an export
    holds, validated whole; ImportRefused (one clear message) for anything that is not
    right. A file is untrusted input: its cwd is never used (a session imported from a
    stranger must not write where the stranger chose), its settings are cut to the
    model and instructions, and its nesting is capped (one line, never a traceback)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise _refused(f"it nests more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise _refused(f"it is not JSON ({exc})") from None
    try:
        check_depth(doc, "the file")
    except ConfigError:
        raise _refused(f"it nests more than {MAX_DEPTH} levels deep") from None
    doc = mend_tree(doc)  # a lone surrogate (`\ud800`) becomes U+FFFD (depth checked first)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _refused(f'it is not a bastion conversation export (no "format": "{FORMAT}")')
    version = doc.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise _refused("its format_version is missing or not a positive whole number")
    if version > FORMAT_VERSION:
        raise ImportRefused(
            f"the file is export format {version}, newer than this bastion reads "
            f"({FORMAT_VERSION})",
            hint="upgrade bastion to import it; nothing was written",
        )
    conv = _object(doc, "conversation")
    title = _field(conv, "title", str, "conversation")[:MAX_TITLE]
    _field(conv, "cwd", str, "conversation")  # checked, never used
    settings = _settings(_field(conv, "settings", dict, "conversation"))
    conversation = Conversation(new_id, title, cwd, settings, now, now)
    entries = tuple(
        _record(Entry, e, new_id, f"entries[{i}]", _ENTRY) for i, e in _list(doc, "entries")
    )
    runs = tuple(_record(Run, r, new_id, f"runs[{i}]", _RUN) for i, r in _list(doc, "runs"))
    calls = tuple(
        _record(ToolCallRecord, c, new_id, f"tool_calls[{i}]", _CALL)
        for i, c in _list(doc, "tool_calls")
    )
    if "ledger" in doc and not isinstance(doc["ledger"], list):
        raise _refused('"ledger" is not a list')
    _check_references(entries, runs, calls)
    return conversation, History(tuple(sorted(entries, key=lambda e: e.position)), runs, calls)


MAX_TITLE = 200
MAX_SETTING = 256 * 1024
#: The settings an import keeps: what the conversation was about, not what it may do.
_IMPORTED_SETTINGS = ("model", "instructions")


def _settings(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _IMPORTED_SETTINGS:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > MAX_SETTING:
            raise _refused(f"conversation.settings.{key} is not a string of sane length")
        out[key] = value
    return out


def _refused(why: str) -> ImportRefused:
    return ImportRefused(
        f"cannot import the file: {why}",
        hint="import a file written by `bastion export ID` (JSON format); nothing was written",
    )


def _object(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if not isinstance(value, dict):
        raise _refused(f'"{key}" is missing or not an object')
    return value


def _list(doc: dict[str, Any], key: str) -> list[tuple[int, Any]]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise _refused(f'"{key}" is missing or not a list')
    return list(enumerate(value))


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _refused(f"{where}.{key} is missing or not {kind.__name__}")
    return value


Check = Callable[[dict[str, Any], str], None]
_NUMBER = (int, float)


def _check_entry(obj: dict[str, Any], where: str) -> None:
    if obj.get("kind") not in set(EntryKind) or obj.get("status") not in set(EntryStatus):
        raise _refused(f"{where} has an unknown kind or status")
    _field(obj, "text", str, where)
    _field(obj, "position", int, where)


def _check_run(obj: dict[str, Any], where: str) -> None:
    if obj.get("state") not in set(RunState):
        raise _refused(f"{where} has an unknown state")


def _check_call(obj: dict[str, Any], where: str) -> None:
    if obj.get("state") not in set(ToolCallState):
        raise _refused(f"{where} has an unknown state")
    for key in ("name", "arguments", "run_id", "entry_id", "approval"):
        _field(obj, key, str, where)


_ENTRY: Check = _check_entry
_RUN: Check = _check_run
_CALL: Check = _check_call
_REQUIRED = {
    Entry: (("id", str), ("created_at", _NUMBER), ("data", dict)),
    Run: (("id", str), ("inbox_id", str), ("created_at", _NUMBER), ("updated_at", _NUMBER)),
    ToolCallRecord: (
        ("id", str), ("index", int), ("replay_safe", bool),
        ("created_at", _NUMBER), ("updated_at", _NUMBER),
    ),
}  # fmt: skip


def _record(cls: Any, obj: Any, conversation_id: str, where: str, check: Check) -> Any:
    if not isinstance(obj, dict):
        raise _refused(f"{where} is not an object")
    check(obj, where)
    for key, kind in _REQUIRED[cls]:
        value = obj.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _refused(f"{where}.{key} is missing or of the wrong type")
    return cls.from_dict({**obj, "conversation_id": conversation_id})


def _check_references(
    entries: tuple[Entry, ...], runs: tuple[Run, ...], calls: tuple[ToolCallRecord, ...]
) -> None:
    ids = [e.id for e in entries] + [r.id for r in runs] + [c.id for c in calls]
    for value in ids:
        try:
            parse_uuid(value)
        except ValueError:
            raise _refused(f"{value[:40]!r} is not an id (ids are UUIDs)") from None
    if len(ids) != len(set(ids)):
        raise _refused("an id appears twice")
    if len({e.position for e in entries}) != len(entries):
        raise _refused("two entries have the same position")
    entry_ids = {e.id for e in entries}
    for call in calls:
        if call.entry_id not in entry_ids:
            raise _refused(f"tool call {call.id} belongs to no entry of the file")


# --- Markdown -------------------------------------------------------------------------


_WORK = (EntryKind.ASSISTANT, EntryKind.TOOL_RESULT)  # what a supersede leaves out


def export_markdown(view: ConversationView) -> str:
    conv = view.conversation
    lines = [f"# {conv.title or 'Conversation'}", ""]
    lines += [f"- session: `{conv.id}`", f"- cwd: `{conv.cwd}`"]
    lines += [f"- model: `{conv.agent.model}`"] if conv.agent.model else []
    if conv.parent_id:
        lines.append(f"- forked from `{conv.parent_id}`")
    lines.append("")
    calls = {c.id: c for c in view.tool_calls}
    through = compacted_through(view.entries)
    gone = superseded_runs(view.entries)
    for entry in view.entries:
        status = "" if entry.status == EntryStatus.COMPLETE else f" *({entry.status})*"
        if entry.position <= through and entry.kind != EntryKind.SUMMARY:
            status += " *(compacted)*"
        if entry.run_id in gone and entry.kind in _WORK:
            status += " *(superseded: not in the model's context)*"
        if entry.kind == EntryKind.USER:
            lines += [f"## User{status}", "", entry.text, ""]
        elif entry.kind == EntryKind.ASSISTANT:
            lines += _assistant(entry, status, calls)
        elif entry.kind == EntryKind.TOOL_RESULT:
            continue  # folded under the call that asked for it
        elif entry.kind in (EntryKind.SUMMARY, EntryKind.RESET):
            lines += compacted_markdown(entry)
        else:
            lines += [f"## {entry.kind.title()}{status}", "", entry.text, ""]
    if view.todos:  # the model's plan as it stands (runtime.plan)
        lines += ["## Todo list", ""]
        lines += [f"- {line}" for line in plan_text(view.todos).splitlines()] + [""]
    return "\n".join(lines).rstrip() + "\n"


def compacted_markdown(entry: Entry) -> list[str]:
    """How compacted history reads: the hook for compaction (summary entries replace
    what came before them in the model's context; `data` may say what was folded,
    e.g. "entries" or "tokens_before", shown when present)."""
    folded = entry.data.get("entries", entry.data.get("compacted"))
    note = f" ({folded} earlier entries)" if isinstance(folded, int) else ""
    if entry.kind == EntryKind.RESET:
        return ["---", "", f"**Context reset{note}.**", "", entry.text, ""]
    quoted = [f"> {line}" if line else ">" for line in entry.text.splitlines()]
    return ["---", "", f"**Compacted{note}** — what the model keeps of the above:", "", *quoted, ""]


def _assistant(entry: Entry, status: str, calls: dict[str, ToolCallRecord]) -> list[str]:
    lines = [f"## Assistant{status}", ""]
    if entry.data.get("reasoning"):
        lines += ["<details><summary>Reasoning</summary>", "", entry.data["reasoning"], "",
                  "</details>", ""]  # fmt: skip
    if entry.text:
        lines += [entry.text, ""]
    for item in entry.data.get("tool_calls", []):
        record = calls.get(item.get("key") or item.get("id", ""))
        lines += _tool_call(item, record)
    return lines


def _tool_call(item: dict[str, Any], record: ToolCallRecord | None) -> list[str]:
    name = item.get("name", "?")
    state = record.state if record is not None else "no result"
    result = (record.result or {}) if record is not None else {}
    ok = result.get("ok")
    mark = "✓" if ok else ("✗" if ok is False else "…")
    summary = f"{mark} <code>{name}</code> {_preview(item.get('arguments', ''))}"
    lines = [f"<details><summary>{summary}</summary>", "",
             *fenced(_pretty(item.get("arguments", "")), "json")]  # fmt: skip
    data = result.get("data") or {}
    if isinstance(data, dict) and isinstance(data.get("diff"), str) and data["diff"]:
        lines += fenced(data["diff"].rstrip("\n"), "diff")
    elif record is not None and record.result is not None:
        text = _result_text(result)
        if text:
            lines += fenced(text)
    if state != ToolCallState.DONE:
        lines += [f"*{state}*", ""]
    return [*lines, "</details>", ""]


def fenced(text: str, language: str = "") -> list[str]:
    """A code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text, fence, ""]


def _result_text(result: dict[str, Any]) -> str:
    refusal = result.get("refusal")
    if isinstance(refusal, dict) and refusal.get("message"):
        return f"{refusal.get('code', 'REFUSED')}: {refusal['message']}"
    data = result.get("data")
    if isinstance(data, dict):
        for key in ("output", "content", "text"):
            if isinstance(data.get(key), str):
                return str(data[key]).rstrip("\n")
        return json.dumps(data, ensure_ascii=False, indent=2)
    return ""


def _pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False, indent=2)
    except ValueError:
        return arguments


def _preview(arguments: str, limit: int = 60) -> str:
    try:
        args = json.loads(arguments)
    except ValueError:
        return ""
    if not isinstance(args, dict):
        return ""
    first = next((v for v in args.values() if isinstance(v, str)), "")
    first = " ".join(first.split())
    text = first if len(first) <= limit else first[: limit - 1] + "…"
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
