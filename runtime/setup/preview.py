"""What a folder's project files would change if the user trusted it, in words.

The app's trust screen and `bastion trust` show this before the decision. The
files are read the safe way (runtime.config.safe_read) whether or not the folder is
trusted: reading is not applying, and a file that cannot be read is one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.config.settings import read_project_rules
from runtime.model.errors import ConfigError
from runtime.model.rules import RuleKind
from runtime.setup.load import (
    DEFAULT_APPROVAL_MODE,
    PROJECT_CONFIG,
    load_config,
    read_config_file,
    user_config_path,
)
from runtime.setup.project import restrict_project

__all__ = ["hooks_report", "project_preview"]


def project_preview(cwd: str, env: Mapping[str, str] | None = None) -> list[str]:
    """One line per change the folder's project files would make (and per setting that
    would be ignored even then); [] when the folder has none."""
    env = os.environ if env is None else env
    lines: list[str] = []
    path = Path(cwd) / PROJECT_CONFIG
    try:
        user = read_config_file(user_config_path(env))
    except ConfigError:
        user = {}
    try:
        project = read_config_file(path, project_root=cwd)
    except ConfigError as exc:
        lines.append(f"{PROJECT_CONFIG}: cannot be used: {exc.message}")
        project = {}
    kept, ignored = restrict_project(project, user, DEFAULT_APPROVAL_MODE.value)
    lines.extend(_describe(kept))
    lines.extend(f"ignored even if trusted: {why}" for why in ignored)
    try:
        rules, refused = read_project_rules(cwd)
    except ConfigError as exc:
        lines.append(f".bastion/settings.toml: cannot be used: {exc.message}")
        return lines
    commands = [r.pattern for r in rules if r.kind == RuleKind.COMMAND]
    edits = [r.pattern or "." for r in rules if r.kind == RuleKind.EDITS]
    if commands:
        lines.append("runs without asking: " + ", ".join(f"`{c}`…" for c in commands))
    if edits:
        lines.append("edits without asking under: " + ", ".join(f"{e}/" for e in edits))
    tools = [r.describe() for r in rules if r.kind == RuleKind.TOOL]
    if tools:  # your own MCP servers' tools (a project cannot add a server)
        lines.append("runs without asking: " + ", ".join(tools))
    lines.extend(f"refused even if trusted: {line.partition(': ')[2]}" for line in refused)
    lines.extend(_hooks(cwd))
    return lines


def _hooks(cwd: str) -> list[str]:
    """One line per hook of the settings file: commands that run without asking, each
    whole (not `HookSpec.shown`'s tail: what the user is asked to trust is all of it;
    the front ends show its control characters, `runtime.visible`)."""
    from runtime.hooks import project_hooks

    try:
        hooks = project_hooks(cwd).hooks
    except ConfigError as exc:
        return [f".bastion/settings.toml: [hooks] cannot be used: {exc.message}"]
    return [
        f"runs `{h.command}` without asking on every {h.event}"
        + (
            f" of {h.matcher}"
            if h.event in ("PreToolUse", "PostToolUse") and h.matcher != "*"
            else ""
        )
        + " (sandboxed, no network)"
        for h in hooks
    ]


def _describe(kept: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in kept.items():
        if key == "providers":
            for name, table in value.items():
                for field, setting in table.items():
                    lines.append(f"providers.{name}.{field} = {setting!r}")
        elif key == "models":
            lines.append(f"model details for {', '.join(sorted(value))}")
        elif key == "instructions":
            lines.append(f"instructions ({len(value):,} characters) in every system prompt")
        else:
            lines.append(f"{key} = {value!r}")
    return lines


def hooks_report(cwd: str) -> str:
    """`bastion doctor`'s line: the hooks a session started in `cwd` would run (the
    user's, and a trusted project's), each command whole (doctor shows its control
    characters). ConfigError when a file's [hooks] is wrong."""
    from runtime.config.trust import trust_of
    from runtime.hooks import project_hooks

    mine = load_config(cwd).hooks.hooks
    theirs = project_hooks(cwd).hooks if trust_of(cwd).trusted else ()
    if not mine and not theirs:
        return "none configured ([[hooks.EVENT]] tables in config.toml)"
    shown = [f"{h.event} `{h.command}`" for h in mine] + [
        f"{h.event} `{h.command}` (project)" for h in theirs
    ]
    return f"{len(shown)} configured: " + "; ".join(shown)
