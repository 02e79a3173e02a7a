"""Project instructions: AGENTS.md files from the user's config and the repository.

Which files, farthest first and nearest last (a nearer file is read later, so
it has the last word):

    $XDG_CONFIG_HOME/bastion/AGENTS.md        the user's own, for every project
    <repository root>/AGENTS.md               the folder holding .git
    ...                                       each folder in between
    <workspace>/AGENTS.md                     where bastion runs

In each folder AGENTS.md is read, or CLAUDE.md where there is no AGENTS.md.
Without a repository (no .git above the workspace) only the workspace folder is
read. Together they are capped at `INSTRUCTIONS_LIMIT` bytes: the nearest files
are kept whole first, and the first file that does not fit is cut, with a note
in the text saying which and how much. Files farther than that are left out,
each with a note too. A file that cannot be read is listed with its error and
left out of the text; it never stops a run.

Each file is read like a tool read (runtime.config.safe_read): a repository's from a
pinned descriptor of the repository root, so an AGENTS.md that is a symlink (to
`~/.ssh/id_ed25519`, say) or that has a symlinked folder on its way is listed
as not read and never reaches the model; only regular files, at most 256 KiB
each. The user's own file may be a symlink they made, but not a FIFO or device.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from runtime.config.safe_read import read_project_file, read_user_file
from runtime.model.errors import ConfigError

__all__ = [
    "INSTRUCTIONS_LIMIT",
    "InstructionFile",
    "ProjectInstructions",
    "instruction_paths",
    "load_instructions",
]

#: The most bytes of instruction files placed in the system prompt.
INSTRUCTIONS_LIMIT = 32 * 1024
_NAMES = ("AGENTS.md", "CLAUDE.md")


class InstructionFile(msgspec.Struct, frozen=True):
    """One instruction file: its size, how many of its bytes were used, or why none were."""

    path: str
    size: int
    used: int
    error: str | None = None

    @property
    def cut(self) -> bool:
        return self.error is None and self.used < self.size


class ProjectInstructions(msgspec.Struct, frozen=True):
    """The files found (farthest first) and the text they make for the system prompt."""

    files: tuple[InstructionFile, ...] = ()
    text: str = ""

    @property
    def cut(self) -> bool:
        return any(f.cut for f in self.files)

    def describe(self) -> str:
        """One line for people: which files were loaded, and any cut or error."""
        if not self.files:
            return "no AGENTS.md or CLAUDE.md found"
        parts = []
        for f in self.files:
            if f.error is not None:
                parts.append(f"{f.path} (not read: {f.error})")
            elif f.cut:
                parts.append(f"{f.path} ({f.used:,} of {f.size:,} bytes: over the cap)")
            else:
                parts.append(f"{f.path} ({f.size:,} bytes)")
        return ", ".join(parts)


def user_instructions_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "AGENTS.md"


def repository_root(workspace: Path) -> Path | None:
    """The nearest folder at or above `workspace` holding .git (a folder or a file)."""
    for folder in (workspace, *workspace.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _in_folder(folder: Path) -> Path | None:
    """The folder's instruction file: the first of AGENTS.md, CLAUDE.md that is a regular
    file (looked at without following links), else the first that exists at all (a
    symlink, listed as not read), else None."""
    present = [folder / name for name in _NAMES if os.path.lexists(folder / name)]
    for candidate in present:
        if stat.S_ISREG(os.lstat(candidate).st_mode):
            return candidate
    return present[0] if present else None


def instruction_paths(workspace: str | Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The instruction files that exist, farthest first (the user's, then root to workspace)."""
    env = os.environ if env is None else env
    here = Path(os.path.realpath(workspace))
    root = repository_root(here)
    folders = [here]
    while root is not None and folders[-1] != root:
        folders.append(folders[-1].parent)
    found = [p for p in (_in_folder(f) for f in reversed(folders)) if p is not None]
    user = user_instructions_path(env)
    if os.path.exists(user) and user not in found:
        found.insert(0, user)
    return found


def _read(
    path: Path, base: Path, env: Mapping[str, str] | None
) -> tuple[bytes | None, int, str | None]:
    """(at most MAX_FILE_BYTES of the file, its size, None) or (None, 0, why not). The
    user's own file may be a symlink; a repository's is read pinned from `base`."""
    try:
        if path == user_instructions_path(os.environ if env is None else env):
            read = read_user_file(path)
        else:
            read = read_project_file(base, os.path.relpath(path, base))
    except ConfigError as exc:
        return None, 0, exc.message.rpartition(": ")[2] or exc.message
    if read is None:
        return None, 0, "it no longer exists"
    return read.data, read.size, None


def _cut_utf8(raw: bytes, limit: int) -> bytes:
    """`raw` cut to at most `limit` bytes, never inside a UTF-8 character."""
    cut = raw[:limit]
    return cut.decode("utf-8", "ignore").encode("utf-8") if len(raw) > limit else cut


def load_instructions(
    workspace: str | Path,
    env: Mapping[str, str] | None = None,
    *,
    limit: int = INSTRUCTIONS_LIMIT,
) -> ProjectInstructions:
    """Read the instruction files for `workspace`, nearest kept first within `limit`."""
    paths = instruction_paths(workspace, env)
    here = Path(os.path.realpath(workspace))
    base = repository_root(here) or here
    budget = limit
    kept: dict[int, tuple[InstructionFile, bytes]] = {}
    for index in range(len(paths) - 1, -1, -1):  # nearest first
        path = paths[index]
        raw, size, error = _read(path, base, env)
        if raw is None:
            kept[index] = (InstructionFile(str(path), 0, 0, error), b"")
            continue
        used = _cut_utf8(raw, budget)
        budget -= len(used)
        kept[index] = (InstructionFile(str(path), size, len(used)), used)
    files = tuple(kept[i][0] for i in range(len(paths)))
    sections = [_section(kept[i][0], kept[i][1], limit) for i in range(len(paths))]
    text = "\n\n".join(s for s in sections if s)
    return ProjectInstructions(files, text)


def _section(file: InstructionFile, used: bytes, limit: int) -> str:
    if file.error is not None:
        return ""
    if file.used == 0 and file.size > 0:
        return (
            f"[{file.path} ({file.size:,} bytes) was left out: project instructions are "
            f"capped at {_size(limit)} and nearer files came first]"
        )
    body = used.decode("utf-8", "replace").rstrip()
    text = f"From {file.path}:\n{body}"
    if file.cut:
        text += (
            f"\n[{file.path} was cut here: {file.used:,} of its {file.size:,} bytes fit in "
            f"the {_size(limit)} cap on project instructions]"
        )
    return text


def _size(limit: int) -> str:
    return f"{limit // 1024} KiB" if limit % 1024 == 0 else f"{limit:,} bytes"
