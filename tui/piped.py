"""Piped stdin with a prompt: `git diff | bastion -p "review this"`.

The prompt comes first and what was piped follows as a fenced block, at most
`STDIN_LIMIT` bytes of it (a note says how much was left out). Only a pipe, a
regular file or a socket counts as piped: a terminal is never read, and
neither is a character device such as /dev/null (nothing there) or /dev/zero
(no end). Empty or blank input adds nothing. Input that is not UTF-8 is
refused with where it went wrong, before anything is opened or stored.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from typing import Any

from tui.exits import UsageError

__all__ = ["STDIN_LIMIT", "compose_prompt", "is_piped", "prompt_with_stdin", "read_piped"]

#: The most of piped stdin placed in the prompt, in bytes.
STDIN_LIMIT = 256 * 1024
_READ = 64 * 1024
_UTF8_HINT = "pass UTF-8 text (convert it with `iconv -t UTF-8`)"
_BACKTICKS = re.compile(r"`{3,}")


def is_piped(stdin: Any) -> bool:
    """True when `stdin` is a pipe, a regular file or a socket (not a terminal or device)."""
    if stdin is None:
        return False
    try:
        fd = stdin.fileno()
        if os.isatty(fd):
            return False
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def read_piped(stream: Any, limit: int = STDIN_LIMIT) -> tuple[str, int, int]:
    """(text of the first `limit` bytes, bytes kept, bytes in all) of a binary stream.

    Everything is read (so the writer never sees a broken pipe) but only the
    first `limit` bytes are kept; a cut never splits a UTF-8 character.
    """
    kept = bytearray()
    total = 0
    while True:
        block = stream.read(_READ)
        if not block:
            break
        total += len(block)
        if len(kept) < limit:
            kept += block[: limit - len(kept)]
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(bytes(kept), final=total <= limit)
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"stdin is not valid UTF-8 (byte 0x{kept[exc.start]:02x} at offset {exc.start}): "
            f"{_UTF8_HINT}"
        ) from None
    return text, len(text.encode("utf-8")), total


def _fence(text: str) -> str:
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=2)
    return "`" * max(3, longest + 1)


def compose_prompt(prompt: str, piped: str, kept: int, total: int) -> str:
    """The prompt, then the piped text as a fenced block, with a note when it was cut."""
    if not piped.strip():
        return prompt
    fence = _fence(piped)
    body = piped if piped.endswith("\n") else piped + "\n"
    parts = [prompt.rstrip("\n"), "", fence, body + fence]
    if kept < total:
        parts.append(
            f"[stdin was cut: the first {kept:,} of {total:,} bytes are shown "
            f"(the limit is {STDIN_LIMIT // 1024} KiB)]"
        )
    return "\n".join(parts)


def prompt_with_stdin(prompt: str, stdin: Any) -> str:
    """`prompt` with whatever is piped on `stdin` appended, if anything is."""
    if not is_piped(stdin):
        return prompt
    stream = stdin.buffer if hasattr(stdin, "buffer") else stdin
    text, kept, total = read_piped(stream)
    return compose_prompt(prompt, text, kept, total)
