"""Approval rules: which calls run without asking, and the rule an answer would save.

A rule is a command prefix matched on word boundaries (`git status` allows
`git status -s`, never `git statusx` nor `echo git status`), or "edits under a
folder" (write_file/edit_file on a path inside it). A compound command runs
without asking only when every one of its simple commands is allowed; shell
text that `runtime.config.shell` cannot prove simple is never allowed by a rule.

Scopes: `session` rules live in the store with their conversation; `project`
rules in `<workspace>/.bastion/settings.toml` (runtime.config.settings); `invocation`
rules come from `--allow` and last for one process.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence

from runtime.config.shell import Word, split_commands
from runtime.model.rules import (
    COMMAND_TOOLS,
    EDIT_TOOLS,
    GUARDED,
    TOOL_SEPARATOR,
    BadRule,
    Rule,
    RuleKind,
    Scope,
)


def command_rule(text: str, scope: str = Scope.SESSION) -> Rule:
    """A command-prefix rule from user text such as `git status` (BadRule if it is not
    plain words)."""
    commands = split_commands(text)
    if commands is None or len(commands) != 1 or not all(w.literal for w in commands[0]):
        raise BadRule(
            f"{text!r} is not a plain command prefix",
            hint="give the command's leading words, e.g. 'git status' or 'npm run test'",
        )
    pattern = " ".join(w.text for w in commands[0])
    why = refuses_rule(pattern)
    if why is not None:
        raise BadRule(
            f"{text!r} cannot be a rule: {why}",
            hint="name the program it runs instead (e.g. 'pytest', 'npm run test'), "
            "or use --approval-mode full-auto to run every command",
        )
    return Rule(RuleKind.COMMAND, pattern, scope)


_TOOL_PATTERN = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*__(?:[A-Za-z0-9_.-]+|\*)")


def is_tool_pattern(text: str) -> bool:
    """Whether `text` names an MCP tool (`NAME__tool`) or a whole server (`NAME__*`)."""
    return _TOOL_PATTERN.fullmatch(text.strip()) is not None


def tool_rule(text: str, scope: str = Scope.SESSION) -> Rule:
    if not is_tool_pattern(text):
        raise BadRule(
            f"{text!r} is not an MCP tool name",
            hint="give NAME__tool for one tool of server NAME, or NAME__* for all of them",
        )
    return Rule(RuleKind.TOOL, text.strip(), scope)


def allow_rule(text: str, scope: str = Scope.SESSION) -> Rule:
    """`--allow TEXT`: an MCP tool rule for `NAME__tool` / `NAME__*`, else a command prefix."""
    return tool_rule(text, scope) if is_tool_pattern(text) else command_rule(text, scope)


def edits_rule(folder: str, scope: str = Scope.SESSION) -> Rule:
    parts = folder_parts(folder)
    if parts is None or (parts and parts[0].casefold() == GUARDED):
        raise BadRule(
            f"{folder!r} is not a folder inside the workspace",
            hint="give a workspace-relative folder such as 'src' ('.' for the whole workspace)",
        )
    return Rule(RuleKind.EDITS, "/".join(parts), scope)


def folder_parts(path: str) -> tuple[str, ...] | None:
    """A workspace-relative path as its segments; None if the workspace would refuse it
    (absolute, `~`, `..`, backslash, NUL)."""
    if not path.strip() and path != "":
        return None
    if path.startswith(("/", "~")) or "\\" in path or "\x00" in path:
        return None
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if ".." in parts:
        return None
    return parts


# Resolves a tool path to its segments when nothing on the way is a symlink (or None).
Resolve = Callable[[str], "tuple[str, ...] | None"]


def call_path(arguments: str) -> str | None:
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return None
    path = args.get("path") if isinstance(args, dict) else None
    return path if isinstance(path, str) else None


def call_command(arguments: str) -> str | None:
    """The shell text of a run_command call (argv is quoted back into it)."""
    try:
        args = json.loads(arguments or "{}")
    except ValueError:
        return None
    if not isinstance(args, dict):
        return None
    if isinstance(args.get("command"), str):
        return str(args["command"])
    argv = args.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        import shlex

        return shlex.join(argv)
    return None


def guarded_path(arguments: str) -> bool:
    """A write/edit aimed at `.bastion/` (any case): never asked, always refused."""
    path = call_path(arguments)
    parts = folder_parts(path) if path is not None else None
    return bool(parts) and parts is not None and parts[0].casefold() == GUARDED


def allowing(
    rules: Sequence[Rule], name: str, arguments: str, resolve: Resolve = folder_parts
) -> tuple[Rule, ...]:
    """The rules that together allow this call (one per simple command); () if it must ask."""
    if TOOL_SEPARATOR in name:  # an MCP tool: a rule naming it, or its whole server
        server = name.partition(TOOL_SEPARATOR)[0]
        named = (name, f"{server}{TOOL_SEPARATOR}*")
        return next(((r,) for r in rules if r.kind == RuleKind.TOOL and r.pattern in named), ())
    if name in COMMAND_TOOLS:
        text = call_command(arguments)
        if text is None or GUARDED in text:
            return ()
        commands = split_commands(text)
        if commands is None:
            return ()
        used: list[Rule] = []
        for words in commands:
            rule = _command_match(rules, words)
            if rule is None:
                return ()
            if rule not in used:
                used.append(rule)
        return tuple(used)
    if name in EDIT_TOOLS:
        path = call_path(arguments)
        parts = resolve(path) if path is not None else None
        if not parts or parts[0].casefold() == GUARDED:
            return ()
        for rule in rules:
            if rule.kind == RuleKind.EDITS:
                folder = tuple(rule.pattern.split("/")) if rule.pattern else ()
                if len(parts) > len(folder) and parts[: len(folder)] == folder:
                    return (rule,)
    return ()


def _command_match(rules: Sequence[Rule], words: list[Word]) -> Rule | None:
    for rule in rules:
        if rule.kind != RuleKind.COMMAND or refuses_rule(rule.pattern) is not None:
            continue  # (a stored or imported rule on a wrapper allows nothing)
        prefix = rule.pattern.split(" ")
        if prefix[0] == "find" and any(w.text in _FIND_ACTIONS for w in words):
            continue
        if len(words) < len(prefix):
            continue
        head = words[: len(prefix)]
        if all(w.literal for w in head) and [w.text for w in head] == prefix:
            return rule
    return None


# Programs whose first argument names what they do (`git status`, `cargo test`).
_SUBCOMMANDS = frozenset(
    {
        "git", "npm", "pnpm", "yarn", "bun", "deno", "cargo", "go", "docker", "podman",
        "kubectl", "helm", "gh", "pip", "pip3", "uv", "poetry", "make", "just", "nox",
        "tox", "dotnet", "mvn", "gradle", "./gradlew", "brew", "apt", "apt-get", "terraform",
        "rustup", "conda", "mix", "bundle", "rake", "composer", "swift", "hatch", "pdm",
    }
)  # fmt: skip
# Program and subcommand that run a named script or module: one word more.
_RUNNERS = frozenset(
    {
        ("npm", "run"), ("pnpm", "run"), ("yarn", "run"), ("bun", "run"), ("uv", "run"),
        ("poetry", "run"), ("pdm", "run"), ("hatch", "run"), ("python", "-m"),
        ("python3", "-m"), ("npm", "exec"), ("bundle", "exec"), ("cargo", "run"),
    }
)  # fmt: skip


# Programs that run whatever their arguments say: a shell, an interpreter, or a wrapper
# that runs another command. A rule on one would allow every command, so no rule may
# start with one (nor a runner's script name, `uv run bash`); this list is the README's.
OPEN_ENDED = frozenset(
    {
        "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
        "eval", "exec", "source", ".", "command", "builtin", "sudo", "doas", "su", "env",
        "xargs", "nohup", "nice", "ionice", "timeout", "time", "stdbuf", "setsid", "chroot",
        "unshare", "nsenter", "flock", "watch", "script", "strace", "ltrace", "gdb",
        "taskset", "parallel", "ssh", "node", "nodejs", "deno", "bun", "npx", "uvx", "pipx",
        "php", "lua", "luajit", "tclsh", "wish", "Rscript", "julia", "osascript", "pwsh",
        "powershell", "awk", "gawk", "mawk", "nawk", "sed",
    }
)  # fmt: skip
# Interpreters with versioned names: python3.12, perl5.36, ruby3.2, pypy3 …
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|php|lua)[0-9.]*")
# `find` runs or deletes through these: a `find` rule never covers a call using one.
_FIND_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)


def open_ended(program: str) -> bool:
    """Whether `program` (a command's first word) runs whatever its arguments say."""
    name = program.rsplit("/", 1)[-1]
    return name in OPEN_ENDED or _VERSIONED.fullmatch(name) is not None


def refuses_rule(pattern: str) -> str | None:
    """Why a command rule `pattern` can never be a rule (None when it can)."""
    words = pattern.split(" ")
    if words == ["git"]:
        return "a rule on `git` alone would allow any command (`git -c` runs programs)"
    if open_ended(words[0]):
        return (
            f"a rule on `{words[0]}` would allow any command "
            "(it is a shell, an interpreter or a wrapper)"
        )
    if len(words) > 2 and tuple(words[:2]) in _RUNNERS and open_ended(words[2]):
        return f"a rule on `{pattern}` would allow any command ({words[2]} runs anything)"
    return None


def _plain(word: Word) -> bool:
    return (
        word.literal and bool(word.text) and not word.text.startswith("-") and "=" not in word.text
    )


def propose_command(words: list[Word], scope: str) -> Rule | None:
    if not words or not _plain(words[0]) or open_ended(words[0].text):
        return None
    take = 1
    if len(words) > 1 and tuple(w.text for w in words[:2]) in _RUNNERS:
        take = 3 if len(words) > 2 and _plain(words[2]) else 2
    elif words[0].text in _SUBCOMMANDS and len(words) > 1 and _plain(words[1]):
        take = 2
    elif words[0].text == "git":
        return None  # `git -C x status`: a rule on `git` alone would allow `git -c`
    pattern = " ".join(w.text for w in words[:take])
    if refuses_rule(pattern) is not None:
        return None
    if words[0].text == "find" and any(w.text in _FIND_ACTIONS for w in words):
        return None
    return Rule(RuleKind.COMMAND, pattern, scope)


def propose(
    name: str, arguments: str, scope: str = Scope.SESSION, have: Sequence[Rule] = ()
) -> tuple[Rule, ...]:
    """The rules that answering `a` (always) would save for this call: a command's
    leading words (one rule per simple command not allowed yet), or the folder that
    holds the file a write or edit changes, or the MCP tool's name. () when no rule can
    cover the call."""
    if TOOL_SEPARATOR in name and is_tool_pattern(name):
        return (Rule(RuleKind.TOOL, name, scope),)
    if name in COMMAND_TOOLS:
        text = call_command(arguments)
        commands = split_commands(text) if text is not None and GUARDED not in text else None
        if commands is None:
            return ()
        out: list[Rule] = []
        for words in commands:
            if _command_match(have, words) is not None:
                continue
            rule = propose_command(words, scope)
            if rule is None:
                return ()
            if rule not in out:
                out.append(rule)
        return tuple(out)
    if name in EDIT_TOOLS:
        path = call_path(arguments)
        parts = folder_parts(path) if path is not None else None
        if not parts or parts[0].casefold() == GUARDED:
            return ()
        return (Rule(RuleKind.EDITS, "/".join(parts[:-1]), scope),)
    return ()


def unique(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    out: list[Rule] = []
    seen: set[tuple[str, str]] = set()
    for rule in rules:
        if (rule.kind, rule.pattern) not in seen:
            seen.add((rule.kind, rule.pattern))
            out.append(rule)
    return tuple(out)
