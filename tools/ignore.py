"""A compact .gitignore matcher: enough of gitignore(5) for marking and pruning.

Supported: comments, ``!`` negation, trailing ``/`` (directories only), anchored
patterns (a ``/`` before the end), ``*``, ``?``, ``[...]`` and ``**``.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Rule(NamedTuple):
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(glob: str) -> str:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = glob.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = glob[i + 1 : j].replace("\\", "\\\\")
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            i = j + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for raw in text.splitlines():
        line = raw.rstrip(" ")
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        body = _translate(line.lstrip("/"))
        prefix = "" if anchored else "(?:.*/)?"
        try:
            regex = re.compile(f"{prefix}{body}\\Z", re.DOTALL)
        except re.error:
            continue
        rules.append(Rule(regex, negate, dir_only))
    return tuple(rules)


class IgnoreFrame(NamedTuple):
    base: tuple[str, ...]
    rules: tuple[Rule, ...]


def is_ignored(frames: list[IgnoreFrame], parts: tuple[str, ...], is_dir: bool) -> bool:
    """Last matching rule wins; deeper .gitignore files come later in ``frames``."""
    verdict = False
    for frame in frames:
        depth = len(frame.base)
        if parts[:depth] != frame.base or len(parts) <= depth:
            continue
        rel = "/".join(parts[depth:])
        for rule in frame.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(rel):
                verdict = not rule.negate
    return verdict


def read_gitignore(dir_fd: int, limit: int = 256 * 1024) -> tuple[Rule, ...]:
    """Rules from ``.gitignore`` in an open directory (never following a link)."""
    import os

    try:
        fd = os.open(
            ".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return ()
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ()
        data = os.read(fd, limit)
    except OSError:
        return ()
    finally:
        os.close(fd)
    return parse_rules(data.decode("utf-8", "replace"))


def unignored_files(
    frames: list[IgnoreFrame], parts: tuple[str, ...], names: list[str]
) -> list[str]:
    """The files of `names` (in the directory at `parts`) no rule ignores: what
    ``is_ignored(frames, (*parts, name), False)`` keeps, with each frame's base and
    prefix worked out once per directory rather than once per file, and no work at all
    when every rule that applies here is for directories only (``build/``)."""
    applicable: list[tuple[str, tuple[Rule, ...]]] = []
    for frame in frames:
        depth = len(frame.base)
        if depth > len(parts) or parts[:depth] != frame.base:
            continue
        rules = tuple(rule for rule in frame.rules if not rule.dir_only)
        if rules:
            rest = parts[depth:]
            applicable.append(("/".join(rest) + "/" if rest else "", rules))
    if not applicable:
        return names
    kept = []
    for name in names:
        verdict = False
        for prefix, rules in applicable:
            rel = prefix + name
            for rule in rules:
                if rule.regex.match(rel):
                    verdict = not rule.negate
        if not verdict:
            kept.append(name)
    return kept
