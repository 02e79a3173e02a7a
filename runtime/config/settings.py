"""Project approval rules: `<workspace>/.bastion/settings.toml`.

Read only in a folder the user trusts (runtime.config.trust): a stranger's clone cannot
grant itself rules. Read like a tool read (pinned, regular file, capped), and a
rule on a shell, interpreter or wrapper (`bash`, `python3`, `env` …) is refused
with a line naming it: it would allow every command.

    [approvals]
    commands = ["git status", "npm run test"]   # command prefixes
    edits = ["src", "docs"]                     # folders whose files may be written
    tools = ["github__get_issue", "docs__*"]    # MCP tools (runtime.mcp), or a server's

Read when a driver starts and again whenever the file changes (its size, time
or inode); written atomically (temp file + rename) under a lock, keeping any
other table in the file. The model can never write it: the tools refuse every
write under `.bastion/`, and no rule allows a call that names it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from runtime.config.rules import (
    Resolve,
    allowing,
    command_rule,
    edits_rule,
    folder_parts,
    tool_rule,
    unique,
)
from runtime.config.safe_read import parse_toml, read_project_file, too_large
from runtime.model.errors import ConfigError
from runtime.model.rules import BadRule, Rule, RuleKind, Scope

log = logging.getLogger(__name__)
SETTINGS = Path(".bastion") / "settings.toml"


def settings_path(root: str | os.PathLike[str]) -> Path:
    return Path(root) / SETTINGS


def load_project_rules(root: str | os.PathLike[str]) -> tuple[Rule, ...]:
    """The rules in the project's settings file (none if it does not exist); ConfigError
    naming the file when it cannot be read. Rules refused on reading are left out."""
    return read_project_rules(root)[0]


def read_project_rules(root: str | os.PathLike[str]) -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    """The project file's rules and, one line each, the rules it holds that were refused
    (a shell, interpreter or wrapper: such a rule would allow everything)."""
    return _rules_of(_read(root), settings_path(root))


def _read(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings file's data, read pinned (no symlink on the way, a regular file, at
    most 256 KiB, nested at most 64 deep): {} when there is none."""
    path = settings_path(root)
    read = read_project_file(root, SETTINGS.as_posix())
    if read is None:
        return {}
    if read.cut:
        raise too_large(path, read.size)
    return parse_toml(read.data, path)


def _rules_of(data: dict[str, Any], path: Path) -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    table = data.get("approvals", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [approvals] must be a table", hint="see the README")
    out: list[Rule] = []
    refused: list[str] = []
    for key, make in (("commands", command_rule), ("edits", edits_rule), ("tools", tool_rule)):
        items = table.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ConfigError(
                f"{path}: approvals.{key} must be a list of strings", hint="see the README"
            )
        for item in items:
            try:
                out.append(make(item, Scope.PROJECT))
            except BadRule as exc:
                refused.append(f"{path}: {exc.message}")
    return unique(out), tuple(refused)


def add_project_rules(root: str | os.PathLike[str], rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """Add `rules` to the project's file (atomically, under a lock, other content kept);
    returns every project rule. ConfigError (nothing changed) if it cannot."""
    path = settings_path(root)
    try:
        path.parent.mkdir(exist_ok=True)
        with locked(path.parent / "settings.lock"):
            data = _read(root)
            current = _rules_of(data, path)[0]
            merged = unique([*current, *(r.but(scope=Scope.PROJECT) for r in rules)])
            if merged == current:
                return current
            table = dict(data.get("approvals", {}))
            table["commands"] = [r.pattern for r in merged if r.kind == RuleKind.COMMAND]
            table["edits"] = [r.pattern or "." for r in merged if r.kind == RuleKind.EDITS]
            tools = [r.pattern for r in merged if r.kind == RuleKind.TOOL]
            if tools or "tools" in table:
                table["tools"] = tools
            text = dump_toml({**data, "approvals": table})
            replace_file(path, text)
            return merged
    except OSError as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror}", hint="check the folder's permissions"
        ) from None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created 0600 if missing) for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a temp file beside it, fsync, rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class ProjectRules:
    """The project's rules, re-read when the file changes. A file that breaks after
    the start is reported (logged) and counts as no rules: calls ask."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = root
        self.path = settings_path(root)
        self._stamp: tuple[int, int, int] | None = None
        self._rules: tuple[Rule, ...] = ()
        self.rules(strict=True)

    def _current_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def rules(self, *, strict: bool = False) -> tuple[Rule, ...]:
        stamp = self._current_stamp()
        if stamp == self._stamp and (stamp is not None or not self._rules):
            return self._rules
        try:
            self._rules, refused = read_project_rules(self.root)
            for line in refused:  # (said to the user by load_config's notes)
                log.info("%s", line)
        except ConfigError as exc:
            if strict:
                raise
            log.warning("%s; project approval rules ignored until it is fixed", exc)
            self._rules = ()
        self._stamp = stamp
        return self._rules


def dump_toml(data: dict[str, Any]) -> str:
    """TOML for plain data (strings, numbers, booleans, lists of them, tables; a table in
    a list is written inline)."""
    lines: list[str] = []
    _table(data, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(data: dict[str, Any], name: tuple[str, ...], lines: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if name and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(_key(k) for k in name) + "]")
    for key, value in scalars.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables.items():
        _table(value, (*name, key), lines)


def _key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key)
    return key if bare else _string(key)


def _string(text: str) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    for c in set(out):
        if ord(c) < 0x20 or ord(c) == 0x7F:
            out = out.replace(c, f"\\u{ord(c):04x}")
    return f'"{out}"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):  # in an array, such as [[hooks.PostToolUse]] tables
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise ConfigError(
        f"cannot write a {type(value).__name__} back to the settings file",
        hint="keep .bastion/settings.toml to strings, numbers, booleans, lists and tables",
    )


class RuleBook:
    """Every rule a driver consults: this invocation's (`--allow`), the project's file
    and, passed in per decision, the session's (read inside the deciding transaction)."""

    def __init__(
        self,
        project: ProjectRules | None,
        invocation: Sequence[Rule] = (),
        resolve: Resolve = folder_parts,
    ) -> None:
        self.project = project
        self.invocation = tuple(invocation)
        self.resolve = resolve

    def standing(self) -> tuple[Rule, ...]:
        project = self.project.rules() if self.project is not None else ()
        return (*self.invocation, *project)

    def allowing(self, session: Sequence[Rule], name: str, arguments: str) -> tuple[Rule, ...]:
        return allowing([*session, *self.standing()], name, arguments, self.resolve)
