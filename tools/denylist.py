"""The user's deny-list: paths tools and commands must not touch.

Entries are ``~/x`` or absolute paths, name patterns without a ``/`` (``.env``,
``.env.*``) that match a file or folder of that name at any depth of the
workspace, or workspace-relative patterns with a ``/`` (``config/secrets/*``).
The file tools refuse a denied path (and their listings and searches leave it
out); commands see deny-listed folders empty and files empty and read-only
(``tools/landlock.py``). Light to import: the workspace uses it.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re

DEFAULT_DENY = ("~/.ssh", "~/.aws", "~/.gnupg", ".env", ".env.*")
WALK_DIRS = 4000  # how many workspace folders are searched for deny-listed names
SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "__pycache__"})


def expand(entry: str) -> str:
    return os.path.expanduser(entry) if entry.startswith("~") else entry


class DenyList:
    """Deny-list entries as they apply to a workspace rooted at ``root``. (A plain
    class: the workspace imports this module, and one-shot tool runs stay lean.)"""

    __slots__ = ("entries", "root")

    def __init__(self, root: str, entries: tuple[str, ...]) -> None:
        self.root, self.entries = root, entries

    def match(self, rel: str) -> str | None:
        """The entry that denies workspace-relative ``rel`` (or an ancestor), if any."""
        parts = [p for p in rel.split("/") if p and p != "."]
        for entry in self.entries:
            path = expand(entry)
            if os.path.isabs(path):
                inside = os.path.relpath(path, self.root)
                if inside.startswith(".."):
                    continue
                path = inside
            if "/" not in path:
                if any(fnmatch.fnmatchcase(p, path) for p in parts):
                    return entry
                continue
            pattern = path.strip("/").split("/")
            for i in range(len(pattern), len(parts) + 1):
                if all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts[:i], pattern, strict=False)):
                    return entry
        return None

    def targets(self) -> tuple[list[str], bool]:
        """Existing absolute paths the entries name (``~``/absolute entries, and names
        found in the workspace), and whether the workspace search was complete."""
        found: list[str] = []
        names: list[str] = []
        for entry in self.entries:
            path = expand(entry)
            if os.path.isabs(path):
                found += glob.glob(path) if glob.has_magic(path) else [path]
            elif "/" in path:
                found += glob.glob(os.path.join(self.root, path.strip("/")))
            else:
                names.append(path)
        complete = True
        if names:
            complete = self._walk(names, found)
        return [p for p in dict.fromkeys(found) if os.path.lexists(p)], complete

    def _walk(self, names: list[str], found: list[str]) -> bool:
        """Breadth-first over the workspace's folders (not following links), up to
        WALK_DIRS of them; False if there were more."""
        match = re.compile("|".join(fnmatch.translate(n) for n in names)).match
        todo = [self.root]
        for seen, top in enumerate(todo):
            if seen >= WALK_DIRS:
                return False
            try:
                entries = os.scandir(top)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    if match(entry.name):
                        found.append(entry.path)
                    elif entry.name not in SKIP_DIRS and entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        return True
