"""Which hooks are configured: the `[hooks]` table of the user's config.toml and, in a
trusted folder only, of the project's `.bastion/settings.toml`.

Claude Code's `hooks` settings (event → matcher groups → commands) flattened into
TOML arrays of tables, one table per command:

    [hooks]
    timeout = 60                        # seconds, default for every hook (max 600)

    [[hooks.PreToolUse]]
    matcher = "run_command"             # tool name: exact, "*", a glob ("edit_*"),
    command = "~/bin/check-command"     #   or alternatives ("write_file|edit_file")
    timeout = 10
    fail_open = false                   # a guard that fails blocks the call (default);
                                        #   true lets it through (Claude Code's way)

    [[hooks.PostToolUse]]
    matcher = "edit_file|write_file"
    command = ".bastion/hooks/format.sh"

    [[hooks.UserPromptSubmit]]          # no matcher: every prompt
    command = "~/bin/prompt-guard"

Events: Claude Code's (PreToolUse, PostToolUse, UserPromptSubmit, Stop, SessionStart,
PreCompact) and bastion's own (PreRequest, PostResponse, PostToolBatch: runtime.hooks.rounds).

A wrong key is a ConfigError naming the file and the key (the file is not half
applied). Only this module reads the table; it imports nothing of the run.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from runtime.model.errors import ConfigError

EVENTS = (
    "PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "PreCompact",
    "PreRequest", "PostResponse", "PostToolBatch",  # bastion's own (runtime.hooks.rounds)
)  # fmt: skip
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
_ENTRY_KEYS = {"matcher", "command", "timeout", "fail_open"}
EXAMPLE = '[[hooks.PostToolUse]]\nmatcher = "edit_file"\ncommand = "ruff format --quiet ."'


class HookSpec(msgspec.Struct, frozen=True):
    """One configured command for one event. `source` is "user" or "project": only the
    user's own hooks may approve a call (skip its prompt)."""

    event: str
    command: str
    matcher: str = "*"
    timeout: float = DEFAULT_TIMEOUT
    source: str = "user"
    fail_open: bool = False  # PreToolUse only: a failing hook lets the call through

    def matches(self, tool_name: str | None) -> bool:
        """Whether this hook runs for `tool_name` (events without a tool: always)."""
        if tool_name is None or self.event not in TOOL_EVENTS:
            return True
        return any(
            fnmatch.fnmatchcase(tool_name, part.strip() or "*") for part in self.matcher.split("|")
        )

    @property
    def shown(self) -> str:
        """The command as one short line (for a transcript line): a long one keeps its
        end, where a script's name is."""
        line = " ".join(self.command.split())
        return line if len(line) <= 60 else "…" + line[-59:]


class HookSet(msgspec.Struct, frozen=True):
    """Every configured hook, the user's first (in file order), then the project's."""

    hooks: tuple[HookSpec, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def matching(self, event: str, tool_name: str | None = None) -> tuple[HookSpec, ...]:
        return tuple(h for h in self.hooks if h.event == event and h.matches(tool_name))

    def __add__(self, other: HookSet) -> HookSet:
        return HookSet(self.hooks + other.hooks)


def parse_hooks(table: Any, path: Path | str, source: str = "user") -> HookSet:
    """The `[hooks]` table of the file at `path`; ConfigError (one line) when it is wrong."""
    if table is None:
        return HookSet()
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: hooks must be a table", hint=f"for example\n{EXAMPLE}")
    default = _seconds(path, "hooks.timeout", table.get("timeout", DEFAULT_TIMEOUT))
    out: list[HookSpec] = []
    for event, entries in table.items():
        if event == "timeout":
            continue
        if event not in EVENTS:
            raise ConfigError(
                f"{path}: hooks.{event} is not a hook event",
                hint=f"use one of: {', '.join(EVENTS)}",
            )
        if not isinstance(entries, list):
            raise ConfigError(
                f"{path}: hooks.{event} must be an array of tables ([[hooks.{event}]])",
                hint=f"for example\n{EXAMPLE}",
            )
        for i, entry in enumerate(entries):
            out.append(_entry(path, f"hooks.{event}[{i}]", event, entry, default, source))
    return HookSet(tuple(out))


def _entry(
    path: Path | str, where: str, event: str, entry: Any, default: float, source: str
) -> HookSpec:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{path}: {where} must be a table", hint=f"for example\n{EXAMPLE}")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: {where} has unknown key {unknown[0]!r}",
            hint="a hook has command, and optionally matcher, timeout and fail_open",
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip() or "\x00" in command:
        raise ConfigError(
            f"{path}: {where}.command must be a non-empty string",
            hint='for example command = "ruff format --quiet ."',
        )
    matcher = entry.get("matcher", "*")
    if not isinstance(matcher, str):
        raise ConfigError(
            f"{path}: {where}.matcher must be a string",
            hint='a tool name, "*", a glob such as "edit_*", or "write_file|edit_file"',
        )
    timeout = _seconds(path, f"{where}.timeout", entry.get("timeout", default))
    fail_open = entry.get("fail_open", False)
    if not isinstance(fail_open, bool) or (fail_open and event != "PreToolUse"):
        raise ConfigError(
            f"{path}: {where}.fail_open must be true or false, and only a PreToolUse hook has it",
            hint="fail_open = true lets a call through when its PreToolUse hook fails",
        )
    return HookSpec(event, command, matcher or "*", timeout, source, fail_open)


def _seconds(path: Path | str, where: str, value: Any) -> float:
    if type(value) not in (int, float) or not 0 < value <= MAX_TIMEOUT:
        raise ConfigError(
            f"{path}: {where} must be a number of seconds, more than 0 and at most {MAX_TIMEOUT:g}",
            hint="for example timeout = 60",
        )
    return float(value)


def project_hooks(root: str) -> HookSet:
    """The hooks of `<root>/.bastion/settings.toml`, read pinned like every project file.
    The caller decides whether the folder is trusted; this only reads."""
    from runtime.config.safe_read import parse_toml, read_project_file, too_large
    from runtime.config.settings import SETTINGS, settings_path

    path = settings_path(root)
    read = read_project_file(root, SETTINGS.as_posix())
    if read is None:
        return HookSet()
    if read.cut:
        raise too_large(path, read.size)
    return parse_hooks(parse_toml(read.data, path).get("hooks"), path, source="project")
