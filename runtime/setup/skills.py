"""Skills: instructions the model loads when a task calls for them (Claude Code's format).

    ~/.config/bastion/skills/NAME/SKILL.md       the user's, in every folder
    <cwd>/.bastion/skills/NAME/SKILL.md          the project's, only in a trusted folder

A SKILL.md starts with front matter giving its `name` and a one-line `description`:

    ---
    name: release-notes
    description: Write release notes from the commits since the last tag
    ---
    (the instructions the model follows when it uses the skill)

Only the descriptions go into every request: the `skill` tool's description lists
each skill by name and what it is for, and the model calls `skill {name}` to read
one's instructions when it applies (they come back as the call's result, so a
resumed run sees the same). A skill is text for the model, never run by itself.

What a hostile repository could do with it: nothing before the folder is trusted
(its skills are not listed). Trusted, a project's skill cannot take a user's skill's
name; its files are read pinned (no symlink on the way, regular files only) and
capped (MAX_SKILL_BYTES); a skill the model asks for that is not listed is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from runtime.config.safe_read import read_project_file, read_user_file
from runtime.model.errors import ConfigError
from runtime.model.llm import ToolSpec
from runtime.model.tools import OnStart, ToolboxLayer, ToolInfo, ToolOutcome, invalid_arguments
from runtime.setup.commands import front_matter

__all__ = ["SKILL_TOOL", "Skill", "SkillToolbox", "load_skills"]

SKILL_TOOL = "skill"
MAX_SKILL_BYTES = 64 * 1024
MAX_SKILLS = 100
PROJECT_DIR = ".bastion/skills"


class Skill(msgspec.Struct, frozen=True):
    name: str
    description: str
    source: str  # "user" or "project"
    root: str  # the folder its path is relative to (the config dir, or the project)
    path: str  # its SKILL.md, relative to `root` for a project's


def load_skills(
    cwd: str, trusted: bool, env: Mapping[str, str]
) -> tuple[tuple[Skill, ...], tuple[str, ...]]:
    """The user's skills, then (in a trusted folder) the project's; a note per one
    skipped."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    user_dir = Path(base) / "bastion" / "skills"
    found: dict[str, Skill] = {}
    notes: list[str] = []
    for name in _folders(user_dir):
        where = user_dir / name / "SKILL.md"
        _add(found, notes, partial(_user_bytes, where), "user", "", str(where))
    if trusted:
        for name in _project_folders(cwd):
            rel = f"{PROJECT_DIR}/{name}/SKILL.md"
            _add(found, notes, partial(_project_bytes, cwd, rel), "project", cwd, rel)
    return tuple(found.values()), tuple(notes)


def _add(
    found: dict[str, Skill],
    notes: list[str],
    read: Callable[[], bytes | None],
    source: str,
    root: str,
    path: str,
) -> None:
    shown = os.path.join(root, path) if root else path
    try:
        raw = read()
        if raw is None:
            return
        meta, _ = _parse(raw, shown)
    except ConfigError as exc:
        notes.append(f"{exc.message}: the skill was skipped")
        return
    name = meta.get("name") or Path(path).parent.name
    if name in found:
        notes.append(f"{shown}: ignored: a skill named {name!r} is listed already")
        return
    found[name] = Skill(name, meta.get("description", "")[:300], source, root, path)


def _parse(raw: bytes, shown: str) -> tuple[dict[str, str], str]:
    if len(raw) > MAX_SKILL_BYTES:
        raise ConfigError(f"{shown} is over {MAX_SKILL_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{shown} is not UTF-8 text") from None
    meta, body = front_matter(text)
    if not meta.get("description"):
        raise ConfigError(f"{shown} has no description in its front matter")
    return meta, body


def _folders(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if (folder / n).is_dir())[:MAX_SKILLS]
    except OSError:
        return []


def _project_folders(cwd: str) -> list[str]:
    from tools.refusal import Refused
    from tools.workspace import RelPath, Workspace, WorkspaceError

    try:
        with Workspace.open(cwd) as ws:
            fd = ws.open_dir(RelPath((".bastion", "skills")))
            try:
                return sorted(os.listdir(fd))[:MAX_SKILLS]
            finally:
                os.close(fd)
    except (Refused, WorkspaceError, OSError):
        return []


def _user_bytes(path: Path) -> bytes | None:
    found = read_user_file(path, MAX_SKILL_BYTES + 1)
    return found.data if found else None


def _project_bytes(cwd: str, rel: str) -> bytes | None:
    found = read_project_file(cwd, rel, MAX_SKILL_BYTES + 1)
    return found.data if found else None


def skill_spec(skills: tuple[Skill, ...]) -> ToolSpec:
    listed = "\n".join(f"- {s.name}: {s.description}" for s in skills)
    return ToolSpec(
        SKILL_TOOL,
        "Load a skill: instructions for a kind of task, written by the user or the "
        "project. When a task matches one below, call this with its name first and "
        f"follow what it says.\n{listed}",
        {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "The skill's name."}},
            "required": ["name"],
            "additionalProperties": False,
        },
    )


def read_skill(skill: Skill) -> ToolOutcome:
    """The skill's instructions (read again, pinned, as when it was listed)."""
    try:
        raw = (
            _project_bytes(skill.root, skill.path)
            if skill.source == "project"
            else _user_bytes(Path(skill.path))
        )
        if raw is None:
            raise ConfigError(f"{skill.path} is gone")
        _, body = _parse(raw, skill.path)
    except ConfigError as exc:
        return ToolOutcome(False, f"REFUSED NOT_FOUND: skill {skill.name}: {exc.message}", {})
    folder = os.path.dirname(os.path.join(skill.root, skill.path) if skill.root else skill.path)
    text = f"Skill {skill.name} ({skill.source}; its folder: {folder}):\n\n{body.strip()}"
    return ToolOutcome(True, text, {"skill": skill.name, "source": skill.source})


class SkillToolbox(ToolboxLayer):
    """`skill` added to what `inner` offers, listing `skills` by description."""

    def __init__(self, inner: Any, skills: tuple[Skill, ...]) -> None:
        super().__init__(inner)
        self.skills = {s.name: s for s in skills}
        self._spec = skill_spec(skills)

    def specs(self) -> tuple[ToolSpec, ...]:
        found: tuple[ToolSpec, ...] = self.inner.specs() if self.inner is not None else ()
        return (*found, self._spec)

    def info(self, name: str) -> ToolInfo | None:
        if name == SKILL_TOOL:
            return ToolInfo(read_only=True, replay_safe=True, concurrent=True)
        return self.inner.info(name) if self.inner is not None else None

    async def run(
        self,
        name: str,
        arguments: str,
        on_output: Callable[[str], None] | None = None,
        on_start: OnStart | None = None,
        **extra: Any,
    ) -> ToolOutcome:
        if name == SKILL_TOOL:
            try:
                wanted = json.loads(arguments or "{}").get("name")
            except (ValueError, AttributeError):
                wanted = None
            skill = self.skills.get(wanted) if isinstance(wanted, str) else None
            if skill is None:
                known = ", ".join(sorted(self.skills))
                return invalid_arguments(name, f"no skill {wanted!r}; the skills: {known}")
            return read_skill(skill)
        if self.inner is None:
            return invalid_arguments(name, "no workspace tools are available here")
        result: ToolOutcome = await self.inner.run(name, arguments, on_output, on_start, **extra)
        return result
