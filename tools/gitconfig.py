"""A reader of git's configuration file syntax, and the judgement of which settings
are inert: ones that can neither make git run a program nor point it somewhere else.

Bastion never asks git what a workspace's config says (that would obey it); this
module reads the bytes itself, as git's own parser (config.c) does: sections
``[core]``, ``[remote "origin"]`` and the old ``[branch.main]``, keys with or
without ``= value``, quotes, the ``\\n \\t \\b \\" \\\\`` escapes, a backslash
before a newline, ``#``/``;`` comments, a key on a header's line. Anything it
cannot read is a ``ConfigSyntaxError``, which callers treat as not inert: git might
read it differently.

``INERT`` is an allow-list, not a deny-list: a key git may add tomorrow is not
inert until someone says so here. It holds what ``git init``, ``clone``,
``remote add``, ``config user.*``, ``branch -u``, ``submodule add``, ``worktree
add`` and ``sparse-checkout`` write. A few of its keys are inert only for some
values (``VALUE_CHECKS``): a URL that names a remote helper (``x::...``) runs
``git-remote-x``; ``submodule.*.update = !cmd`` runs cmd; ``core.worktree``
outside the workspace sends git's writes there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_BYTES = 1 << 20  # a config larger than this is not read (not inert)


class ConfigSyntaxError(ValueError):
    """The file is not configuration as git writes it (line numbers from 1)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``key = value``: ``key`` is ``section[.subsection].name`` with the section
    and name lower-cased (git's canonical form); ``value`` None for a bare key."""

    section: str
    subsection: str | None
    name: str
    value: str | None
    line: int

    @property
    def key(self) -> str:
        middle = "" if self.subsection is None else f".{self.subsection}"
        return f"{self.section}{middle}.{self.name}"


# --- reading ------------------------------------------------------------------------


class _Reader:
    """Git's config grammar over one file's text (decoded with surrogateescape)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        self.pos += 1
        if char == "\n":
            self.line += 1
        return char

    def fail(self, what: str) -> ConfigSyntaxError:
        return ConfigSyntaxError(f"line {self.line}: {what}")

    def skip_comment(self) -> None:
        while self.peek() not in ("", "\n"):
            self.take()

    def settings(self) -> list[Setting]:
        found: list[Setting] = []
        section: tuple[str, str | None] | None = None
        while (char := self.peek()) != "":
            if char in " \t\r\n":
                self.take()
            elif char in "#;":
                self.skip_comment()
            elif char == "[":
                self.take()
                section = self.header()
            elif char.isascii() and char.isalpha():
                if section is None:
                    raise self.fail("a key before any [section]")
                line = self.line
                name, value = self.entry()
                found.append(Setting(section[0], section[1], name, value, line))
            else:
                raise self.fail(f"unexpected {char!r}")
        return found

    def header(self) -> tuple[str, str | None]:
        name = ""
        while (char := self.peek()) and (char.isascii() and (char.isalnum() or char in "-.")):
            name += self.take()
        if not name:
            raise self.fail("an empty section name")
        if self.peek() == "]":
            self.take()
            if "." in name:  # [section.subsection], the old form: subsection lower-cased
                head, _, sub = name.partition(".")
                return head.lower(), sub.lower()
            return name.lower(), None
        if self.peek() not in (" ", "\t"):
            raise self.fail("a bad section header")
        while self.peek() in (" ", "\t"):
            self.take()
        if self.take() != '"':
            raise self.fail("a section header without a quoted subsection")
        sub = ""
        while (char := self.take()) != '"':
            if char in ("", "\n"):
                raise self.fail("an unterminated subsection")
            if char == "\\":
                char = self.take()
                if char in ("", "\n"):
                    raise self.fail("an unterminated subsection")
            sub += char
        if self.take() != "]":
            raise self.fail("text after a subsection")
        return name.lower(), sub

    def entry(self) -> tuple[str, str | None]:
        name = ""
        while (char := self.peek()) and char.isascii() and (char.isalnum() or char == "-"):
            name += self.take()
        while self.peek() in (" ", "\t"):
            self.take()
        char = self.peek()
        if char in ("", "\n", "\r", "#", ";"):
            return name.lower(), None
        if char != "=":
            raise self.fail(f"a bad key {name!r}")
        self.take()
        return name.lower(), self.value()

    def value(self) -> str:
        out: list[str] = []
        quoted, pending_space = False, ""
        while self.peek() in (" ", "\t"):
            self.take()
        while True:
            char = self.take()
            if char == "\r" and self.peek() == "\n":
                continue
            if char in ("", "\n"):
                if quoted:
                    raise self.fail("an unterminated quote")
                return "".join(out)
            if not quoted and char in "#;":
                self.skip_comment()
                return "".join(out)
            if not quoted and char in " \t":
                pending_space += char
                continue
            if pending_space and out:
                out.append(pending_space)
            pending_space = ""
            if char == "\\":
                out.append(self.escape())
            elif char == '"':
                quoted = not quoted
            else:
                out.append(char)

    def escape(self) -> str:
        char = self.take()
        if char == "\n":
            return ""  # a continued line
        if char == "\r" and self.peek() == "\n":
            self.take()
            return ""
        escaped = {"t": "\t", "n": "\n", "b": "\b", '"': '"', "\\": "\\"}.get(char)
        if escaped is None:
            raise self.fail(f"a bad escape \\{char}")
        return escaped


def parse(data: bytes) -> list[Setting]:
    """Every setting in a config file's bytes, in order. Raises ConfigSyntaxError."""
    if len(data) > MAX_BYTES:
        raise ConfigSyntaxError(f"over {MAX_BYTES} bytes")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\0" in data:
        raise ConfigSyntaxError("a NUL byte")
    return _Reader(data.decode("utf-8", "surrogateescape")).settings()


# --- judging ------------------------------------------------------------------------

# (section, has a subsection) -> the names that are inert there.
INERT: dict[tuple[str, bool], frozenset[str]] = {
    ("core", False): frozenset({
        "repositoryformatversion", "filemode", "bare", "logallrefupdates", "ignorecase",
        "precomposeunicode", "symlinks", "sparsecheckout", "sparsecheckoutcone", "autocrlf",
        "eol", "safecrlf", "quotepath", "worktree",
    }),
    ("extensions", False): frozenset({"objectformat", "worktreeconfig"}),
    ("index", False): frozenset({"sparse"}),
    ("user", False): frozenset({"name", "email"}),
    ("init", False): frozenset({"defaultbranch"}),
    ("remote", True): frozenset({
        "url", "pushurl", "fetch", "push", "tagopt", "mirror", "prune", "prunetags",
        "skipdefaultupdate", "skipfetchall",
    }),
    ("branch", True): frozenset({"remote", "merge", "rebase", "pushremote", "description"}),
    ("submodule", True): frozenset({
        "url", "active", "branch", "fetchrecursesubmodules", "ignore", "shallow", "update",
    }),
    ("submodule", False): frozenset({"active"}),
    ("pull", False): frozenset({"rebase", "ff"}),
    ("push", False): frozenset({"default", "autosetupremote"}),
    ("fetch", False): frozenset({"prune", "prunetags"}),
    ("lfs", False): frozenset({"repositoryformatversion"}),
}  # fmt: skip
INERT_SECTIONS = frozenset({"color"})  # every key, with or without a subsection

# Why the best-known keys are dangerous, for the one line the user is shown.
KNOWN: dict[str, str] = {
    "core.fsmonitor": "runs a program at every git status",
    "core.hookspath": "moves git's hooks (programs git runs) elsewhere",
    "core.sshcommand": "runs a program when git talks to a remote",
    "core.gitproxy": "runs a program when git talks to a remote",
    "core.askpass": "runs a program when git asks for a password",
    "core.pager": "runs a program for git's output",
    "core.editor": "runs a program when git wants a message",
    "core.attributesfile": "reads attributes (filter and diff drivers) from elsewhere",
    "core.worktree": "points git's work tree outside the workspace",
    "diff.external": "runs a program for every git diff",
    "sequence.editor": "runs a program in git rebase -i",
    "gpg.program": "runs a program when git signs or verifies",
    "uploadpack.packobjectshook": "runs a program when the repository is fetched from",
}
KNOWN_SECTIONS: dict[str, str] = {
    "alias": "defines a git command that can run a program",
    "include": "includes configuration from another file",
    "includeif": "includes configuration from another file",
    "filter": "defines a filter driver (a program git runs on files)",
    "credential": "runs a credential helper program",
    "url": "rewrites where git fetches from and pushes to",
    "uploadpack": "configures what runs when the repository is fetched from",
    "pager": "runs a program for git's output",
    "gpg": "chooses the program git signs with",
    "merge": "may define a merge driver (a program git runs)",
    "diff": "may define a diff driver or textconv (a program git runs)",
    "difftool": "defines a program git difftool runs",
    "mergetool": "defines a program git mergetool runs",
    "remote": "runs a program when git talks to this remote",
}

HELPER_URL = re.compile(r"[A-Za-z0-9][A-Za-z0-9+.-]*::")
SUBMODULE_UPDATE = frozenset({"checkout", "rebase", "merge", "none"})


def _url_ok(value: str | None, _inside: Callable[[str], bool]) -> bool:
    return value is not None and not value.startswith("-") and not HELPER_URL.match(value)


def _update_ok(value: str | None, _inside: Callable[[str], bool]) -> bool:
    return value in SUBMODULE_UPDATE


def _worktree_ok(value: str | None, inside: Callable[[str], bool]) -> bool:
    return value is not None and inside(value)


VALUE_CHECKS: dict[tuple[str, str], Callable[[str | None, Callable[[str], bool]], bool]] = {
    ("remote", "url"): _url_ok,
    ("remote", "pushurl"): _url_ok,
    ("submodule", "url"): _url_ok,
    ("submodule", "update"): _update_ok,
    ("core", "worktree"): _worktree_ok,
}
VALUE_WHY = {
    ("remote", "url"): "names a remote helper (a program git runs) or an option",
    ("remote", "pushurl"): "names a remote helper (a program git runs) or an option",
    ("submodule", "url"): "names a remote helper (a program git runs) or an option",
    ("submodule", "update"): "runs a command at git submodule update",
    ("core", "worktree"): "points git's work tree outside the workspace",
}


def inert(setting: Setting, inside: Callable[[str], bool]) -> bool:
    """Whether ``setting`` can neither run a program nor point git elsewhere.
    ``inside(path)``: whether a path (relative to the config's git dir) stays in
    the workspace, for ``core.worktree``."""
    if setting.section in INERT_SECTIONS:
        return True
    names = INERT.get((setting.section, setting.subsection is not None), frozenset())
    if setting.name not in names:
        return False
    check = VALUE_CHECKS.get((setting.section, setting.name))
    return check is None or check(setting.value, inside)


def why(setting: Setting) -> str:
    """What makes ``setting`` dangerous, in a few words."""
    known = KNOWN.get(f"{setting.section}.{setting.name}")
    if setting.subsection is None and known:
        return known
    if (setting.section, setting.name) in VALUE_WHY:
        return VALUE_WHY[(setting.section, setting.name)]
    if setting.section == "diff" and setting.name in ("textconv", "command"):
        return "defines a diff driver (a program git runs)"
    if setting.section in KNOWN_SECTIONS:
        return KNOWN_SECTIONS[setting.section]
    return "is not among the settings bastion knows to be inert"


def dangerous(
    data: bytes, inside: Callable[[str], bool], before: bytes | None = None
) -> list[tuple[str, str]]:
    """(key, why) for each setting in ``data`` that is not inert and was not already
    in ``before`` (the file as it was; None: it did not exist). A file that cannot
    be read as configuration is one entry, ("(unreadable)", the reason)."""
    try:
        settings = parse(data)
    except ConfigSyntaxError as exc:
        return [("(unreadable)", f"git might read it otherwise: {exc}")]
    known: set[tuple[str, str | None]] = set()
    if before is not None:
        try:
            known = {(s.key, s.value) for s in parse(before)}
        except ConfigSyntaxError:
            known = set()
    found: list[tuple[str, str]] = []
    for setting in settings:
        if (setting.key, setting.value) in known or inert(setting, inside):
            continue
        found.append((setting.key, why(setting)))
    return found


def resolves_inside(base: str, root: str) -> Callable[[str], bool]:
    """``inside`` for a config in git dir ``base``: a path, relative to ``base`` or
    absolute, resolves to ``root`` or below it."""
    real_root = os.path.realpath(root)

    def inside(path: str) -> bool:
        target = os.path.realpath(os.path.join(base, path))
        return target == real_root or target.startswith(real_root.rstrip("/") + "/")

    return inside
