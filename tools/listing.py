"""list_directory: one directory's entries with type and size."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

from tools.context import Access, ToolContext
from tools.ignore import IgnoreFrame, is_ignored, read_gitignore
from tools.limits import Budget
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.walk import load_frames
from tools.workspace import EXCLUDED_DIRS, visible

NAME = "list_directory"
DESCRIPTION = (
    "List one directory of the workspace (default: the root): each entry with its "
    "type (file, dir, symlink, other) and size. Directories that searches skip "
    "(.git, node_modules, .venv, __pycache__, .gitignore'd) are marked `excluded`. "
    "Symlinks are shown but never followed."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Workspace-relative directory; default '.'."},
    },
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class ListArgs:
    path: str = "."

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> ListArgs:
        return cls(args.get("path", "."))


def kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def describe(
    fd: int, name: str, parts: tuple[str, ...], frames: list[IgnoreFrame]
) -> dict[str, Any]:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return {"name": name, "type": "unknown"}
    entry: dict[str, Any] = {"name": name, "type": kind(st.st_mode)}
    if entry["type"] == "file":
        entry["size"] = st.st_size
    is_dir = entry["type"] == "dir"
    if (is_dir and name in EXCLUDED_DIRS) or (
        frames and is_ignored(frames, (*parts, name), is_dir)
    ):
        entry["excluded"] = True
    return entry


def list_directory(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = ListArgs.from_dict(raw_args)
    ws = ctx.workspace
    rel = ws.parse(args.path)
    ws.authorize(rel, Access.READ, ctx.authorize_path)
    budget = Budget(ctx.limits)
    frames = load_frames(ctx, rel)
    entries: list[dict[str, Any]] = []
    withheld = 0
    with ws.directory(rel) as fd:
        rules = read_gitignore(fd)
        if rules:
            frames.append(IgnoreFrame(rel.parts, rules))
        names = sorted(os.listdir(fd))
        for name in names:
            if not budget.take_entry() or budget.out_of_time():
                break
            child = (*rel.parts, name)
            if not visible(ws, ctx.authorize_path, "/".join(child)):
                withheld += 1
                continue
            entry = describe(fd, name, rel.parts, frames)
            if not budget.take_output(len(name) + 24):
                break
            entries.append(entry)
    if withheld:
        budget.incomplete(f"{withheld} entr(ies) withheld by policy")
    entries.sort(key=lambda e: (e["type"] != "dir", e["name"]))
    return ToolResult.success(
        NAME,
        {
            "path": rel.text,
            "entries": entries,
            "coverage": budget.coverage(),
        },
    )


def format_text(data: dict[str, Any]) -> str:
    lines = [f"{data['path']}:"]
    for e in data["entries"]:
        name = e["name"] + ("/" if e["type"] == "dir" else "")
        extra = [str(e["size"]) + " B"] if "size" in e else []
        if e["type"] not in ("file", "dir"):
            extra.append(e["type"])
        if e.get("excluded"):
            extra.append("excluded")
        lines.append(f"  {name}" + (f"  ({', '.join(extra)})" if extra else ""))
    if not data["entries"]:
        lines.append("  (empty)")
    cov = data["coverage"]
    if not cov["complete"] or cov["reasons"]:
        lines.append(
            "coverage: "
            + ("complete" if cov["complete"] else "PARTIAL")
            + ("; " + "; ".join(cov["reasons"]) if cov["reasons"] else "")
        )
    return "\n".join(lines)


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=True,
    replay_safe=True,
    run=offloaded(NAME, list_directory),
    run_sync=list_directory,
)
