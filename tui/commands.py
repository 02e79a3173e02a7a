"""The read-side subcommands: sessions, export, attach. None of them takes a lease."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from runtime import BastionError, Harness, compacted_through, reduce
from runtime.ids import parse_uuid
from runtime.records import Entry, EntryKind
from runtime.views import ConversationView as Snapshot
from tui.cli import EXIT_OK, EXIT_USAGE, UsageError, error_line


def _id(raw: str) -> str:
    try:
        return parse_uuid(raw)
    except ValueError:
        raise UsageError(
            f"{raw!r} is not a session id (list them with `bastion sessions`)"
        ) from None


def _run(coro: Any) -> int:
    try:
        return int(asyncio.run(coro))
    except BastionError as exc:
        error_line(str(exc))
        return EXIT_USAGE


def sessions(opts: Any) -> int:
    return _run(_sessions(opts))


async def _sessions(opts: Any) -> int:
    import os

    harness = await Harness.open()
    try:
        if opts.action == "rm":
            conv_id = _id(opts.id)
            await harness.delete_conversation(conv_id, force=getattr(opts, "force", False))
            print(f"removed {conv_id}", file=sys.stderr)
            return EXIT_OK
        if opts.action == "search":
            found = await harness.search_conversations(opts.query)
        else:
            found = await harness.list_conversations(None if opts.all else os.getcwd())
        if opts.json:
            rows = [
                {
                    "id": c.id,
                    "title": c.title,
                    "cwd": c.cwd,
                    "created_at": c.created_at,
                    "updated_at": c.updated_at,
                    "model": c.agent.model,
                }
                for c in found
            ]
            print(json.dumps(rows, ensure_ascii=False))
        elif not found:
            print(
                "no conversations here (bastion sessions --all lists every directory)",
                file=sys.stderr,
            )
        else:
            for c in found:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated_at))
                print(f"{c.id}  {when}  {c.title or '(untitled)'}")
        return EXIT_OK
    finally:
        await harness.close()


def export(opts: Any) -> int:
    return _run(_export(opts))


def entry_dict(entry: Entry, compacted: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": entry.id,
        "kind": entry.kind,
        "status": entry.status,
        "text": entry.text,
        "run_id": entry.run_id,
        "position": entry.position,
        "created_at": entry.created_at,
        # Summarised by a compaction: kept here, sent to the model as the summary.
        "compacted": entry.position <= compacted and entry.kind != EntryKind.SUMMARY,
    }
    if entry.kind == EntryKind.SUMMARY:
        out.update(through=entry.data.get("through"), usage=entry.data.get("usage"))
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


def export_json(snap: Snapshot) -> dict[str, Any]:
    conv = snap.conversation
    through = compacted_through(snap.entries)
    return {
        "conversation": {
            "id": conv.id,
            "title": conv.title,
            "cwd": conv.cwd,
            "settings": conv.settings,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "version": conv.version,
        },
        "entries": [entry_dict(e, through) for e in snap.entries],
        "runs": [
            {
                "id": r.id,
                "state": r.state,
                "reason": r.reason,
                "error": r.error,
                "usage": r.usage,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
            }
            for r in snap.runs
        ],
        "tool_calls": [
            {
                "id": c.id,
                "name": c.name,
                "arguments": c.arguments,
                "state": c.state,
                "approval": c.approval,
                "run_id": c.run_id,
                "result": c.result,
            }
            for c in snap.tool_calls
        ],
    }


def export_markdown(snap: Snapshot) -> str:
    conv = snap.conversation
    lines = [
        f"# {conv.title or 'Conversation'}",
        "",
        f"- id: `{conv.id}`",
        f"- cwd: `{conv.cwd}`",
        f"- model: `{conv.agent.model}`",
        "",
    ]
    compacted = compacted_through(snap.entries)
    for entry in snap.entries:
        status = "" if entry.status == "complete" else f" ({entry.status})"
        if entry.position <= compacted and entry.kind != EntryKind.SUMMARY:
            status += " (compacted)"
        if entry.kind == EntryKind.USER:
            lines += [f"## User{status}", "", entry.text, ""]
        elif entry.kind == EntryKind.ASSISTANT:
            lines += [f"## Assistant{status}", ""]
            if entry.text:
                lines += [entry.text, ""]
            for call in entry.data.get("tool_calls", []):
                lines += [
                    f"Tool call `{call['name']}`:",
                    "",
                    "```json",
                    call["arguments"],
                    "```",
                    "",
                ]
        elif entry.kind == EntryKind.TOOL_RESULT:
            lines += [f"### Result of `{entry.data.get('name')}`", "", "```", entry.text, "```", ""]
        else:
            lines += [f"## {entry.kind.title()}{status}", "", entry.text, ""]
    return "\n".join(lines)


def _check_output(path: str) -> None:
    """Refuse an -o FILE whose directory is missing before the store is opened."""
    parent = Path(path).parent
    if not parent.is_dir():
        problem = "is not a directory" if parent.exists() else "does not exist"
        raise UsageError(
            f"cannot write {path}: the directory {parent} {problem} "
            "(create it, or pick another -o FILE)"
        )


def _write_output(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc} (pick another -o FILE)"
        ) from None


async def _export(opts: Any) -> int:
    conv_id = _id(opts.id)
    if opts.output:
        _check_output(opts.output)
    harness = await Harness.open()
    try:
        snap = await harness.snapshot(conv_id)
    finally:
        await harness.close()
    if opts.format == "json":
        text = json.dumps(export_json(snap), ensure_ascii=False, indent=2) + "\n"
    else:
        text = export_markdown(snap)
    if opts.output:
        _write_output(opts.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def compact(opts: Any) -> int:
    return _run(_compact(opts))


async def _compact(opts: Any) -> int:
    """`bastion compact ID [INSTRUCTIONS]`: one summary committed, or a line saying why not."""
    import os

    from runtime import load_config
    from runtime.config import model_resolver

    conv_id = _id(opts.id)
    config = load_config(os.getcwd())
    harness = await Harness.open(resolve_model=model_resolver(config), config=config)
    try:
        entry = await harness.compact(conv_id, opts.instructions)
    finally:
        await harness.close()
    if entry is None:
        print(f"{conv_id}: nothing to compact yet (no whole earlier turn)", file=sys.stderr)
        return EXIT_OK
    data = entry.data
    print(
        f"{conv_id}: compacted {data['compacted']} entries (positions {data['from']}-"
        f"{data['through']}) into a summary of {len(entry.text)} characters; "
        "the originals are kept",
        file=sys.stderr,
    )
    return EXIT_OK


def attach(opts: Any) -> int:
    return _run(_attach(_id(opts.id)))


async def _attach(conv_id: str, poll: float = 0.2) -> int:
    """Follow the ledger: print each entry's text as its checkpoints are committed."""
    harness = await Harness.open()
    try:
        view = await harness.snapshot(conv_id)
        shown: dict[str, int] = {}  # entry id -> characters printed; everything so far first
        print(f"attached to {conv_id} at version {view.version} (Ctrl+C to leave)", file=sys.stderr)
        while True:
            for event in await harness.ledger(conv_id, after=view.version):
                view = reduce(view, event)
            if view.resync_required:
                view = await harness.snapshot(conv_id)
            for entry in view.entries:
                done = shown.get(entry.id)
                if done is None:
                    label = {"user": "> ", "tool_result": "  ⎿ "}.get(entry.kind, "")
                    sys.stdout.write(f"\n{label}")
                    done = 0
                if len(entry.text) > done:
                    sys.stdout.write(entry.text[done:])
                    sys.stdout.flush()
                shown[entry.id] = len(entry.text)
            await asyncio.sleep(poll)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return EXIT_OK
    finally:
        await harness.close()
