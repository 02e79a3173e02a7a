"""What a finished tool call did, in the words a user scans a transcript for:

    Edited src/app.py  +12 −3
    Created notes.txt  (14 B)  +1
    Read README.md  (120 lines)
    Ran pytest -q
    Listed src  (12 entries)
    Found 3 files for *.py
    Searched "TODO" in src  (7 matches)
    Refused: '../secret' is outside the workspace

from the call's committed result (so a reopened session reads the same). Pure and
Textual-free: the app's rows and any line mode can use it. None while a call has no
result, or for a tool it does not know (the row then shows the call as it is).
"""

from __future__ import annotations

from typing import Any

from runtime.model.records import ToolCallRecord
from runtime.model.views import call_summary

__all__ = ["human_size", "row_words"]


def human_size(n: int) -> str:
    """14 B, 2.1 KB, 3.4 MB (1024 to a KB)."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}"
    return f"{n} B"  # (not reached)


def _refusal_words(refusal: dict[str, Any]) -> str:
    message = str(refusal.get("message") or refusal.get("code") or "refused")
    line = next((s.strip() for s in message.splitlines() if s.strip()), "refused")
    if line.startswith("REFUSED ") and ": " in line:  # the model's wording: code first
        line = line.split(": ", 1)[1]
    return f"Refused: {line.rstrip('.')}"


def _diff_counts(record: ToolCallRecord, data: dict[str, Any]) -> str:
    diff = str((record.review or {}).get("diff") or data.get("diff") or "")
    lines = diff.splitlines()
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    parts = ([f"+{added}"] if added else []) + ([f"−{removed}"] if removed else [])
    return "  " + " ".join(parts) if parts else ""


def row_words(name: str, arguments: str, record: ToolCallRecord | None) -> str | None:
    """What the call did, in words (plain text, not markup); see the module."""
    result = record.result if record is not None else None
    if record is None or not result:
        return None
    refusal = result.get("refusal")
    if isinstance(refusal, dict) and not result.get("ok", False):
        return _refusal_words(refusal)
    data = result.get("data")
    if not isinstance(data, dict) or not result.get("ok", True):
        return None
    return _done_words(name, arguments, record, data)


def _done_words(
    name: str, arguments: str, record: ToolCallRecord, data: dict[str, Any]
) -> str | None:
    path = str(data.get("path") or "")
    if name == "edit_file" and path:
        return f"Edited {path}{_diff_counts(record, data)}"
    if name == "write_file" and path:
        verb = "Wrote" if data.get("overwritten") else "Created"
        size = f"  ({human_size(int(data['bytes']))})" if isinstance(data.get("bytes"), int) else ""
        return f"{verb} {path}{size}{_diff_counts(record, data)}"
    if name == "read_file" and path:
        if "media_type" in data:
            return f"Read {path}  (image {data.get('width')}×{data.get('height')})"
        return f"Read {path}{_lines_read(data)}"
    if name == "run_command" and data.get("background"):
        return f"Started {data.get('job_id')} in the background: {call_summary(name, arguments, limit=80)}"
    if name == "run_command":
        return f"Ran {call_summary(name, arguments, limit=100)}"
    if name == "list_directory":
        entries = data.get("entries")
        n = len(entries) if isinstance(entries, list) else None
        count = f"  ({n} entr{'y' if n == 1 else 'ies'})" if n is not None else ""
        return f"Listed {path or call_summary(name, arguments)}{count}"
    if name in ("glob", "search_files"):
        return _found_words(name, arguments, data)
    return None


def _lines_read(data: dict[str, Any]) -> str:
    """`  (120 lines)`, or `  (lines 41-80 of 300)` for a part."""
    total, offset, count = data.get("total_lines"), data.get("offset"), data.get("lines_returned")
    if not isinstance(total, int) or not isinstance(count, int):
        return ""
    if isinstance(offset, int) and (offset > 1 or count < total):
        return f"  (lines {offset}-{offset + count - 1} of {total})"
    return f"  ({total} line{'s' if total != 1 else ''})"


def _found_words(name: str, arguments: str, data: dict[str, Any]) -> str:
    what = call_summary(name, arguments, limit=80)
    if name == "glob":
        files = data.get("files", data.get("matches"))
        n = len(files) if isinstance(files, list) else None
        return f"Found {n} file{'s' if n != 1 else ''} for {what}" if n is not None else what
    matches = data.get("matches")
    n = len(matches) if isinstance(matches, list) else None
    count = f"  ({n} match{'es' if n != 1 else ''})" if n is not None else ""
    return f"Searched {what}{count}"
