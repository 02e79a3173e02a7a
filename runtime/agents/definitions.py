"""Agent definitions: the kinds of subagent the `task` tool can start.

An agent is a name, a description (what the main model reads to choose it), a
prompt (the child's instructions), the tools it gets and an optional model. One
is built in (`general`, read-only); more come from Markdown files in the format
Claude Code users already keep, a front matter then the prompt:

    ---
    name: reviewer
    description: Reviews a change for bugs and missing tests.
    tools: Read, Grep, Glob            (or a [list], or `- item` lines)
    model: openai/gpt-4o-mini          (optional; `inherit` or absent: the parent's)
    ---
    You are a careful reviewer. ...

Files are read from `$XDG_CONFIG_HOME/bastion/agents/*.md` (the user's) and from
`.bastion/agents/*.md` of the project only when the folder is trusted
(runtime.config.trust), pinned like every project file (runtime.config.safe_read: no symlink,
regular files only, size-capped). A file that cannot be read or parsed is
skipped with one line saying why; nothing here raises for a bad file.

What a file can and cannot do: it names tools from a fixed list (Claude Code's
names are mapped to bastion's; anything else is ignored) and the tools run under
the parent's approval mode, which no file can name or raise, so a file can
narrow what a child may do but never widen it past what the parent could do.
A trusted project's agent cannot take the name of a built-in or of the user's own
agent. Its prompt is instructions to a model, like AGENTS.md: a hostile (but
trusted) repository can steer what the child tries, and every write or command
still asks (or is refused) exactly as the parent's would.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from runtime.config.safe_read import read_project_file, read_user_file
from runtime.config.trust import trust_of
from runtime.model.errors import ConfigError

__all__ = [
    "BUILTIN",
    "READ_ONLY_TOOLS",
    "AgentCatalog",
    "AgentDefinition",
    "AgentFileError",
    "load_agents",
    "parse_agent_file",
]

#: What a child gets when its agent names no tools: reading and searching only.
READ_ONLY_TOOLS: tuple[str, ...] = (
    "read_file",
    "list_directory",
    "glob",
    "search_files",
    "read_output",
)
#: Every tool a child may be given (a child never gets `task`: no grandchildren).
CHILD_TOOLS: tuple[str, ...] = (*READ_ONLY_TOOLS, "write_file", "edit_file", "run_command")
#: Claude Code's tool names, as bastion's.
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "read": ("read_file",),
    "notebookread": ("read_file",),
    "write": ("write_file",),
    "edit": ("edit_file",),
    "multiedit": ("edit_file",),
    "glob": ("glob",),
    "grep": ("search_files",),
    "ls": ("list_directory",),
    "bash": ("run_command", "read_output"),
}
MAX_AGENT_FILES = 64  # per folder; more are skipped with a note
MAX_PROMPT_CHARS = 64_000
MAX_DESCRIPTION_CHARS = 1_000
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")


class AgentFileError(ConfigError):
    """An agent file that cannot be used (the catalog skips it with this message)."""


class AgentDefinition(msgspec.Struct, frozen=True):
    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] = READ_ONLY_TOOLS
    model: str = ""  # "" = the parent's model
    source: str = "built in"
    notes: tuple[str, ...] = ()  # what was ignored in its file

    @property
    def writes(self) -> bool:
        return any(t not in READ_ONLY_TOOLS for t in self.tools)


BUILTIN = AgentDefinition(
    name="general",
    description=(
        "Explores the code base to answer a question or gather context: reads, lists, "
        "globs and searches files, changes nothing, and reports back."
    ),
    prompt=(
        "You are a subagent of bastion, a coding agent: the main agent gave you one task. "
        "You cannot see its conversation, only the task below. Work through it with your "
        "tools, then answer with one concise report the main agent can act on: what you "
        "found, with file paths and line numbers, and what you could not find. You cannot "
        "change files."
    ),
)


class AgentCatalog(msgspec.Struct, frozen=True):
    agents: Mapping[str, AgentDefinition] = msgspec.field(
        default_factory=lambda: {BUILTIN.name: BUILTIN}
    )
    notes: tuple[str, ...] = ()  # files skipped, names refused: one line each

    def get(self, name: str) -> AgentDefinition | None:
        return self.agents.get(name)


# --- parsing ----------------------------------------------------------------------------


def parse_agent_file(raw: bytes, source: str) -> AgentDefinition:
    """One agent from a file's bytes; AgentFileError (one line) when it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AgentFileError(f"{source}: not UTF-8 text", hint="save it as UTF-8") from None
    if "\x00" in text:
        raise AgentFileError(f"{source}: not a text file", hint="remove it")
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise AgentFileError(
            f"{source}: no front matter", hint="start the file with --- name/description --- lines"
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise AgentFileError(
            f"{source}: the front matter is not closed", hint="end it with a --- line"
        ) from None
    fields = _front_matter(lines[1:end], source)
    prompt = "\n".join(lines[end + 1 :]).strip()
    return _definition(fields, prompt, source)


def _front_matter(lines: list[str], source: str) -> dict[str, str | list[str]]:
    """`key: value` lines; a value may be quoted, a [list], or followed by `- item` lines."""
    fields: dict[str, str | list[str]] = {}
    key: str | None = None
    for number, line in enumerate(lines, 2):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and key is not None:
            current = fields.get(key)
            items = current if isinstance(current, list) else []
            items.append(_unquote(stripped[2:]))
            fields[key] = items
            continue
        match = _KEY.match(stripped)
        if match is None:
            raise AgentFileError(
                f"{source}:{number}: not a `key: value` line", hint="fix the front matter"
            )
        key, value = match.group(1).lower(), match.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            fields[key] = [_unquote(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            fields[key] = _unquote(value) if value else []
    return fields


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _text(fields: dict[str, str | list[str]], key: str) -> str:
    value = fields.get(key, "")
    return value if isinstance(value, str) else ", ".join(value)


def _definition(fields: dict[str, str | list[str]], prompt: str, source: str) -> AgentDefinition:
    name = _text(fields, "name").strip().lower()
    if not _NAME.match(name):
        raise AgentFileError(
            f"{source}: the name {name[:40]!r} is not a lowercase word (a-z, 0-9, - and _)",
            hint="give it a `name:` such as code-reviewer",
        )
    description = " ".join(_text(fields, "description").split())
    if not description:
        raise AgentFileError(f"{source}: no description", hint="add a `description:` line")
    if not prompt:
        raise AgentFileError(f"{source}: no prompt after the front matter", hint="write one")
    tools, notes = _tools(fields.get("tools"), source)
    model = _text(fields, "model").strip()
    if model.lower() == "inherit" or (model and "/" not in model):
        if model and model.lower() != "inherit":
            notes.append(f"{source}: model {model!r} is not PROVIDER/NAME; the parent's is used")
        model = ""
    return AgentDefinition(
        name,
        description[:MAX_DESCRIPTION_CHARS],
        prompt[:MAX_PROMPT_CHARS],
        tools,
        model,
        source,
        tuple(notes),
    )


def _tools(value: str | list[str] | None, source: str) -> tuple[tuple[str, ...], list[str]]:
    """The bastion tools a file names (read-only ones when it names none)."""
    if value is None:
        return READ_ONLY_TOOLS, []
    names = value if isinstance(value, list) else value.split(",")
    out: list[str] = []
    notes: list[str] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        mapped = _ALIASES.get(name.lower()) or ((name,) if name in CHILD_TOOLS else ())
        if not mapped:
            notes.append(f"{source}: tool {name[:40]!r} is not one a subagent can have; ignored")
        out += [t for t in mapped if t not in out]
    return tuple(out), notes


# --- loading ----------------------------------------------------------------------------


def user_agents_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "bastion" / "agents"


def load_agents(cwd: str, env: Mapping[str, str] | None = None) -> AgentCatalog:
    """The built-in agent, the user's, then the trusted project's (blocking: reads files)."""
    agents: dict[str, AgentDefinition] = {BUILTIN.name: BUILTIN}
    notes: list[str] = []
    for found in _user_files(user_agents_dir(env), notes):
        _add(agents, found, notes, replaces_builtin=True)
    if trust_of(cwd, env).trusted:
        for found in _project_files(cwd, notes):
            _add(agents, found, notes, replaces_builtin=False)
    return AgentCatalog(agents, tuple(notes))


def _add(
    agents: dict[str, AgentDefinition],
    agent: AgentDefinition,
    notes: list[str],
    *,
    replaces_builtin: bool,
) -> None:
    notes += agent.notes
    known = agents.get(agent.name)
    if known is not None and (known.source == BUILTIN.source and not replaces_builtin):
        notes.append(f"{agent.source}: the name {agent.name!r} is built in; ignored")
        return
    if known is not None and known.source != BUILTIN.source:
        notes.append(f"{agent.source}: {known.source} already defines {agent.name!r}; ignored")
        return
    agents[agent.name] = agent


def _user_files(folder: Path, notes: list[str]) -> list[AgentDefinition]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".md"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        notes.append(f"{folder}: cannot list it ({exc.strerror or exc})")
        return []
    out = []
    for name in _capped(names, str(folder), notes):
        path = folder / name
        try:
            read = read_user_file(path)
            if read is not None:
                out.append(parse_agent_file(read.data, str(path)))
        except ConfigError as exc:
            notes.append(f"skipped {exc.message}" if isinstance(exc, AgentFileError) else str(exc))
    return out


def _project_files(cwd: str, notes: list[str]) -> list[AgentDefinition]:
    from tools.refusal import Refused
    from tools.workspace import RelPath, Workspace, WorkspaceError

    rel = ".bastion/agents"
    try:
        with Workspace.open(cwd) as ws:
            fd = ws.open_dir(RelPath((".bastion", "agents")))
            try:
                names = sorted(n for n in os.listdir(fd) if n.endswith(".md"))
            finally:
                os.close(fd)
    except Refused as exc:
        if exc.refusal.code.value != "NOT_FOUND":
            notes.append(f"{rel}: not read ({exc.refusal.message})")
        return []
    except (WorkspaceError, OSError) as exc:
        notes.append(f"{rel}: not read ({exc})")
        return []
    out = []
    for name in _capped(names, rel, notes):
        try:
            read = read_project_file(cwd, f"{rel}/{name}")
            if read is not None:
                out.append(parse_agent_file(read.data, f"{rel}/{name}"))
        except ConfigError as exc:
            notes.append(f"skipped {exc.message}" if isinstance(exc, AgentFileError) else str(exc))
    return out


def _capped(names: list[str], where: str, notes: list[str]) -> list[str]:
    if len(names) > MAX_AGENT_FILES:
        notes.append(f"{where}: {len(names) - MAX_AGENT_FILES} agent files over the cap skipped")
    return names[:MAX_AGENT_FILES]
