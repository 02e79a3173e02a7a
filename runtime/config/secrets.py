"""Keys bastion holds, kept where no command, hook or repository can read them.

A command or hook runs as the user (or, sandboxed, still able to read
`/proc/<pid>/environ` of bastion's processes: Landlock does not stop that read),
and a trusted project may bring a keyless provider of its own: a key printed into
a tool result or a hook's context would reach that project's endpoint. So:

- `harden_process()`, first thing in every bastion process: `PR_SET_DUMPABLE` 0
  (another process of the user, not root, can no longer open this one's
  `/proc/<pid>/environ`, `mem` or `maps`, nor ptrace it), and the values of
  secret variables are overwritten in the process's original environment block,
  the bytes `/proc/<pid>/environ` shows (as setproctitle does with argv): root
  and the sandbox's commands read NULs there. Python's `os.environ` is a copy made
  at start-up and keeps the values, so providers still find their keys; children
  get theirs from it explicitly (`env=`), never the scrubbed block.
- `Redactor`: the exact values of those variables are replaced in what a hook or
  a tool returns before it is stored or sent (`[redacted OPENAI_API_KEY]`), so a key
  reached some other way still does not leave through the transcript.

A secret variable is one whose name says so (`*_API_KEY`, `*_TOKEN`, `*SECRET*`,
`*PASSWORD*`, ...) or that the user's config names as a provider's
`api_key_env`; values shorter than MIN_SECRET characters are not treated as keys.
Standard library only: this runs before anything else is imported.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping

__all__ = [
    "MIN_SECRET",
    "Redactor",
    "harden_process",
    "is_secret_name",
    "note_key_names",
    "redactor",
    "secret_names",
]

MIN_SECRET = 8
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY|PRIVATE_KEY)"
    r"(?:$|_)|_KEY$",
    re.IGNORECASE,
)
PR_SET_DUMPABLE = 4
#: Secrets whose names do not say so: the store's URL (it may hold a password:
#: runtime.setup.storechoice) and libpq's password variable.
_SECRET_NAMES = frozenset({"BASTION_STORE", "PGPASSWORD"})


def is_secret_name(name: str) -> bool:
    return name.upper() in _SECRET_NAMES or bool(_SECRET_NAME.search(name))


def secret_names(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The variables of `environ` (default: this process's) that hold a secret."""
    environ = os.environ if environ is None else environ
    wanted = set(extra)
    return sorted(
        name
        for name, value in environ.items()
        if (name in wanted or is_secret_name(name)) and len(value) >= MIN_SECRET
    )


def harden_process(extra: Iterable[str] = ()) -> list[str]:
    """Make this process's memory unreadable to other processes of the user and
    scrub secret values from its original environment block; returns the names
    scrubbed. Linux only; elsewhere (or where /proc cannot be read) nothing is
    scrubbed and the list is empty."""
    if not sys.platform.startswith("linux"):
        return []
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    names = secret_names(extra=extra)
    if not names:
        return []
    bounds = _environ_bounds()
    if bounds is None:
        return []
    start, end = bounds
    block = ctypes.string_at(start, end - start)
    scrubbed: list[str] = []
    offset = 0
    for raw in block.split(b"\0"):
        name, eq, _ = raw.partition(b"=")
        if eq and name.decode("utf-8", "replace") in names:
            value_at = start + offset + len(name) + 1
            ctypes.memset(value_at, 0, len(raw) - len(name) - 1)
            scrubbed.append(name.decode())
        offset += len(raw) + 1
    return scrubbed


def _environ_bounds() -> tuple[int, int] | None:
    """[env_start, env_end) of this process, from /proc/self/stat (fields 50 and 51)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()
    try:
        start, end = int(fields[47]), int(fields[48])
    except (IndexError, ValueError):
        return None
    if not 0 < start < end or end - start > 16 << 20:
        return None
    return start, end


class Redactor:
    """Replaces the exact values of secret variables in text (longest first)."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self._pairs = sorted(
            ((value, f"[redacted {name}]") for name, value in secrets.items() if value),
            key=lambda pair: -len(pair[0]),
        )
        self._pattern = (
            re.compile("|".join(re.escape(value) for value, _ in self._pairs))
            if self._pairs
            else None
        )
        self._label = dict(self._pairs)

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
    ) -> Redactor:
        environ = os.environ if environ is None else environ
        return cls({name: environ[name] for name in secret_names(environ, extra)})

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(lambda m: self._label[m.group(0)], text)

    def value(self, value: object) -> object:
        """`value` with every string in it (through dicts, lists, tuples) redacted."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value


_key_names: set[str] = set()
_redactor: Redactor | None = None


def note_key_names(names: Iterable[str | None]) -> None:
    """Variables the user's config names as providers' keys (`api_key_env`), secret
    whatever they are called."""
    global _redactor
    new = {n for n in names if n} - _key_names
    if new:
        _key_names.update(new)
        _redactor = None


def redactor() -> Redactor:
    """This process's redactor (its environment's secrets as they are now)."""
    global _redactor
    if _redactor is None:
        _redactor = Redactor.from_environ(extra=_key_names)
    return _redactor
