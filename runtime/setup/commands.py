"""Command files: `/name` commands written in Markdown, as Claude Code users keep them.

    ~/.config/bastion/commands/review.md      the user's, in every folder
    <cwd>/.bastion/commands/review.md         the project's, only in a trusted folder

A file's name is the command (`review.md` is `/review`: lowercase letters, digits and
dashes, starting with a letter); its body is the prompt `/review ARGS` sends, with
`$ARGUMENTS` replaced by ARGS (with no `$ARGUMENTS`, ARGS follow the body after a
blank line). Optional front matter between `---` lines gives a `description` (shown
in /help and the command list) and an `argument-hint`.

What a hostile repository could do with it: nothing before the folder is trusted (its
files are not even listed). Trusted, a project's command file is text the user sends
by typing its name, never run by itself; it cannot replace a built-in command or the
user's own command of the same name (those win, and a note says so). Files are read
pinned (no symlink on the way, regular files only, `runtime.config.safe_read`) and
capped (MAX_COMMAND_BYTES); anything else is one note and the file is skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import msgspec

from runtime.config.safe_read import read_project_file, read_user_file
from runtime.model.errors import ConfigError

__all__ = [
    "MAX_COMMAND_BYTES", "CommandFile", "expand", "expand_command", "front_matter",
    "load_commands",
]  # fmt: skip

MAX_COMMAND_BYTES = 64 * 1024
MAX_COMMANDS = 200  # per folder: a folder of thousands is not read whole
PROJECT_DIR = ".bastion/commands"
_NAME = re.compile(r"[a-z][a-z0-9-]{0,39}")


class CommandFile(msgspec.Struct, frozen=True):
    name: str
    body: str
    description: str = ""
    argument_hint: str = ""
    source: str = "user"  # "user" or "project"
    path: str = ""


def expand(command: CommandFile, arguments: str) -> str:
    """The prompt `/name arguments` sends."""
    if "$ARGUMENTS" in command.body:
        return command.body.replace("$ARGUMENTS", arguments)
    return command.body + (f"\n\n{arguments}" if arguments else "")


expand_command = expand  # (the runtime's public name for it)


def load_commands(
    cwd: str, trusted: bool, env: Mapping[str, str]
) -> tuple[tuple[CommandFile, ...], tuple[str, ...]]:
    """The user's command files, then (in a trusted folder) the project's; and a note
    for each file skipped. (A name a built-in command has is the front end's to refuse:
    `tui.slash.install_files`.)"""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user_dir = Path(base) / "bastion" / "commands"
    found: dict[str, CommandFile] = {}
    notes: list[str] = []
    for name in _listed(user_dir):
        _add(found, notes, partial(_read_user, user_dir, name), str(user_dir / name))
    if trusted:
        for name in _listed_project(cwd, notes):
            where = os.path.join(cwd, PROJECT_DIR, name)
            _add(found, notes, partial(_read_project, cwd, name), where)
    return tuple(found.values()), tuple(notes)


def _add(
    found: dict[str, CommandFile],
    notes: list[str],
    read: Callable[[], CommandFile | None],
    where: str,
) -> None:
    stem = Path(where).stem
    if not _NAME.fullmatch(stem):
        notes.append(f"{where}: ignored: a command's name is lowercase letters, digits and "
                     "dashes, starting with a letter")  # fmt: skip
        return
    if stem in found:
        notes.append(f"{where}: ignored: you have a /{stem} of your own")
        return
    try:
        command = read()
    except ConfigError as exc:
        notes.append(f"{exc.message}: the command file was skipped")
        return
    if command is not None:
        found[stem] = command


def _listed(folder: Path) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md"))
    except OSError:
        return []
    return names[:MAX_COMMANDS]


def _listed_project(cwd: str, notes: list[str]) -> list[str]:
    """The project's command files, listed through a pinned descriptor (a symlinked
    `.bastion` or `commands` folder is not followed: one note)."""
    from tools.refusal import RefusalCode, Refused
    from tools.workspace import RelPath, Workspace, WorkspaceError

    try:
        with Workspace.open(cwd) as ws:
            fd = ws.open_dir(RelPath((".bastion", "commands")))
            try:
                names = sorted(n for n in os.listdir(fd) if n.endswith(".md"))
            finally:
                os.close(fd)
    except Refused as exc:
        if exc.refusal.code is not RefusalCode.NOT_FOUND:
            notes.append(f"{cwd}/{PROJECT_DIR}: not read ({exc.refusal.message})")
        return []
    except (WorkspaceError, OSError):
        return []
    return names[:MAX_COMMANDS]


def _read_user(folder: Path, name: str) -> CommandFile | None:
    found = read_user_file(folder / name, MAX_COMMAND_BYTES + 1)
    return _parse(found.data if found else None, name, "user", str(folder / name))


def _read_project(cwd: str, name: str) -> CommandFile | None:
    found = read_project_file(cwd, f"{PROJECT_DIR}/{name}", MAX_COMMAND_BYTES + 1)
    return _parse(found.data if found else None, name, "project", f"{cwd}/{PROJECT_DIR}/{name}")


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the `key: value` lines between a leading pair of `---` lines, the rest)."""
    meta: dict[str, str] = {}
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is not None:
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep:
                    meta[key.strip().lower()] = value.strip().strip("'\"")
            text = "\n".join(lines[end + 1 :]).strip("\n")
    return meta, text


def _parse(raw: bytes | None, name: str, source: str, path: str) -> CommandFile | None:
    if raw is None:
        return None
    if len(raw) > MAX_COMMAND_BYTES:
        raise ConfigError(f"{path} is over {MAX_COMMAND_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    meta, text = front_matter(text)
    if not text.strip():
        raise ConfigError(f"{path} has no prompt after its front matter")
    return CommandFile(
        Path(name).stem, text, meta.get("description", "")[:200],
        meta.get("argument-hint", "")[:80], source, path,
    )  # fmt: skip
