"""RE2 pattern checks and required-literal extraction for search_files.

The literal is a run of characters every match must contain; files and lines
without it are never handed to the regex engine. Extraction is conservative:
when in doubt it returns None and the whole text is scanned.
"""

from __future__ import annotations

import re
from typing import Any

from tools.refusal import RefusalCode, Refused

MAX_PATTERN = 4096
_BACKREF = re.compile(r"\\(?:[1-9]|k<|k\{|g<|g\{|g-?\d)")
_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!|>)")
_CLASS_ESCAPES = set("dDwWsSbBAzZpPQEx0123456789CXRhHvVNGKk")
_META = set(".^$")


def check_pattern(pattern: str) -> None:
    if not pattern:
        raise Refused(RefusalCode.INVALID_ARGUMENT, "pattern is empty", "give text or a regex")
    if len(pattern) > MAX_PATTERN:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "pattern is too long",
            f"use at most {MAX_PATTERN} characters",
        )
    if _BACKREF.search(pattern):
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "backreferences are not supported (RE2)",
            "search for one occurrence, then read the file, or set literal: true",
        )
    if _LOOKAROUND.search(pattern):
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "lookahead/lookbehind and atomic groups are not supported (RE2)",
            "match the surrounding text directly, or search more broadly and filter",
        )


def compile_pattern(pattern: str, *, literal: bool) -> Any:
    """Compile for bytes, multi-line (^ and $ at line ends), no captures."""
    import re2

    options = re2.Options()
    options.never_capture = True
    options.log_errors = False
    if literal:
        options.literal = True
        source = pattern.encode("utf-8")
    else:
        check_pattern(pattern)
        source = b"(?m)" + pattern.encode("utf-8")
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"invalid regex: {str(exc)[:200]}",
            "RE2 syntax (like Python's re without backreferences or lookaround); "
            "set literal: true to search for the text as is",
        ) from None


def _skip_class(p: str, i: int) -> int:
    """Index just past a ``[...]`` class starting at ``i``."""
    j = i + 1
    if j < len(p) and p[j] == "^":
        j += 1
    if j < len(p) and p[j] == "]":
        j += 1
    while j < len(p):
        if p[j] == "\\":
            j += 2
            continue
        if p.startswith("[:", j):
            end = p.find(":]", j + 2)
            j = end + 2 if end >= 0 else j + 1
            continue
        if p[j] == "]":
            return j + 1
        j += 1
    return len(p)


def _skip_group(p: str, i: int) -> int:
    depth = 0
    j = i
    while j < len(p):
        c = p[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _skip_class(p, j)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(p)


def _quantifier(p: str, i: int) -> tuple[int, bool]:
    """(index past any quantifier at ``i``, whether the atom may be absent)."""
    if i >= len(p):
        return i, False
    c = p[i]
    optional = False
    if c in "*?":
        optional, i = True, i + 1
    elif c == "+":
        i += 1
    elif c == "{":
        m = re.match(r"\{(\d*)(,\d*)?\}", p[i:])
        if m is None:
            return i, False
        optional = (m.group(1) or "0") == "0"
        i += m.end()
    else:
        return i, False
    if i < len(p) and p[i] in "?+":
        i += 1
    return i, optional


def required_literal(pattern: str, *, literal: bool) -> bytes | None:
    """The longest run of text every match must contain, or None."""
    if literal:
        return pattern.encode("utf-8") or None
    if "(?" in pattern and re.search(r"\(\?[a-zA-Z]*[isU]", pattern):
        return None
    runs: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        atom: str | None = None
        if c == "|":
            return None
        if c == "(":
            i = _skip_group(pattern, i)
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "\\":
            nxt = pattern[i + 1 : i + 2]
            i += 2
            if nxt and not nxt.isalnum() and nxt not in _CLASS_ESCAPES:
                atom = nxt
        elif c in _META:
            i += 1
        else:
            atom, i = c, i + 1
        i, optional = _quantifier(pattern, i)
        repeated = pattern[i - 1 : i] in "+}*" if atom is not None else False
        if atom is None or optional:
            runs.append("".join(cur))
            cur = []
            continue
        cur.append(atom)
        if repeated:
            runs.append("".join(cur))
            cur = []
    runs.append("".join(cur))
    best = max(runs, key=lambda r: len(r.encode("utf-8")))
    return best.encode("utf-8") if len(best.encode("utf-8")) >= 2 else None
