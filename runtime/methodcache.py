"""Compiled once: the methods `dataclasses` writes for each class, kept like bytecode.

Every `@dataclass` writes its `__init__`, `__repr__`, `__eq__` and, frozen,
`__hash__`, `__setattr__` and `__delattr__` as source text and compiles it when the
class is made. `bastion -p` makes about 140 such classes (the runtime's records,
events and views, httpx's and anyio's), the app more with Textual's: on Python
3.11 the compiler is a quarter of `bastion -p`'s start (issue 28).

`install()` gives the `dataclasses` module its own `exec` (a module global, which
shadows the builtin there and nowhere else): source it has compiled before comes
from a file of code objects beside the runtime's other bytecode, keyed by the exact
text, so a later process skips the compiler the way a .pyc lets it skip compiling
a module. What it compiles anew is added to that file when the process exits.

The file follows Python's own rules for bytecode: its name carries the
interpreter's cache tag, it honours `PYTHONPYCACHEPREFIX`, and nothing is written
under `PYTHONDONTWRITEBYTECODE` or where the package's folder is read-only. A file
that cannot be read as a dict of code objects (cut short, from another build) is
compiled again from scratch and replaced. It lives with the installed package,
never in a workspace: no repository bastion runs in can reach it.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys

TYPE_CHECKING = False  # (this module loads first: it leaves typing to what needs it)
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any

_CODE = type(compile("", "<string>", "exec"))  # types.CodeType, without importing types

#: Entries kept at most: past this a process starts the file over with its own.
MAX_ENTRIES = 8192


class MethodCache:
    """Code objects by their source text, loaded from and saved to `path`: each kept
    marshalled until a class asks for it, then unmarshalled and let go (a process
    holds only the methods of classes it has not made yet, ~1 KB each)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.codes = self._load()
        self.taken: set[str] = set()  # sources used from the file here (the file has them)
        self.added: dict[str, bytes] = {}
        self.reused = 0

    def _load(self) -> dict[str, bytes]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as file:
                data = marshal.loads(file.read())  # (marshal.load reads a file piecemeal)
        except FileNotFoundError:
            return {}
        except (OSError, EOFError, ValueError, TypeError):
            return {}  # unreadable: every method is compiled again and the file replaced
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and type(v) is bytes}

    def code(self, source: str) -> CodeType:
        kept = self.codes.pop(source, None)
        found = _unmarshal(kept) if kept is not None else None
        if found is not None:
            self.taken.add(source)
            self.reused += 1
            return found
        # dont_inherit: compiled with no __future__ flags, as `exec(source)` in
        # dataclasses (which has none) compiles it.
        compiled = compile(source, "<string>", "exec", dont_inherit=True)
        if source not in self.taken:
            self.added[source] = marshal.dumps(compiled)
        return compiled

    def exec(self, source: Any, globals: Any = None, locals: Any = None) -> None:
        """`exec` as `dataclasses` calls it, with the compiling done once."""
        if isinstance(source, str):
            source = self.code(source)
        builtins.exec(source, globals, locals)

    def save(self) -> None:
        """Add what this process compiled to the file (merged with what other
        processes wrote meanwhile), written whole under a temporary name and renamed."""
        if not self.added or self.path is None or sys.dont_write_bytecode:
            return
        merged = MethodCache(self.path).codes
        if len(merged) + len(self.added) > MAX_ENTRIES:
            merged = {}
        merged.update(self.added)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temporary, "wb") as file:
                marshal.dump(merged, file)
            os.replace(temporary, self.path)
        except OSError:
            # A read-only install: the methods are compiled each run, as without this.
            if os.path.exists(temporary):
                os.unlink(temporary)
            return
        self.added = {}


def _unmarshal(kept: bytes) -> CodeType | None:
    """The code object `kept` holds; None for bytes that are not one (a damaged file)."""
    try:
        found = marshal.loads(kept)
    except (EOFError, ValueError, TypeError):
        return None
    return found if type(found) is _CODE else None


def cache_path() -> str | None:
    """Where the file is: the runtime package's __pycache__ (or its mirror under
    PYTHONPYCACHEPREFIX), named for this interpreter's cache tag; None when the
    interpreter has no tag (bytecode caching is off)."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    package = os.path.dirname(os.path.abspath(__file__))
    name = f"dataclass-methods-2.{tag}.marshal"  # (2: each code object kept as bytes)
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, package.lstrip(os.sep), name)
    return os.path.join(package, "__pycache__", name)


_installed: MethodCache | None = None


def install_method_cache() -> MethodCache:
    """Route `dataclasses`' compiling through the cache for the rest of this process
    (once; later calls return the same cache), and save what is new at exit."""
    global _installed
    if _installed is None:
        import atexit
        import dataclasses

        _installed = MethodCache(cache_path())
        dataclasses.exec = _installed.exec  # type: ignore[attr-defined]
        atexit.register(_installed.save)
    return _installed
