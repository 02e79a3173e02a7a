"""A bounded, descriptor-relative directory walk shared by glob and search.

Directories are opened one segment at a time from their parent's descriptor
with ``O_NOFOLLOW``; symlinks are never followed; excluded and .gitignore'd
directories are skipped (and reported), denied paths are withheld (and counted).
At most one descriptor per level of depth is open at a time.

The walk is the hot path of glob and search (thousands of directories per call),
so it avoids per-entry allocations: each directory is listed once (d_type only,
no stat), a child's path prefix is built by concatenation, and a caller's
per-directory state (glob's pattern automaton) is stepped once per subdirectory.
The .gitignore parser is imported only when a .gitignore is found. With
tools._native a subdirectory is opened (with the same flags) and listed by one
native call, getdents64 with d_type.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tools import native
from tools.context import ToolContext
from tools.limits import Budget
from tools.workspace import _DIR_FLAGS, EXCLUDED_DIRS, RelPath, visible

if TYPE_CHECKING:
    from tools.ignore import IgnoreFrame

MAX_LISTED_SKIPS = 50

Prune = Callable[[tuple[str, ...]], bool]
# ``step(state, name)``: the state of a subdirectory, or None to prune it unopened.
Step = Callable[[Any, str], Any]
# What ``Walker.directories`` yields: (dir_fd, parts, prefix, file_names, state).
Visit = tuple[int, tuple[str, ...], str, list[str], Any]


class WalkReport:
    __slots__ = ("skipped_count", "skipped_directories", "symlinks", "unreadable", "withheld")

    def __init__(self) -> None:
        self.skipped_directories: list[str] = []
        self.skipped_count = 0
        self.withheld = 0
        self.symlinks = 0
        self.unreadable = 0

    def skip(self, rel: str) -> None:
        self.skipped_count += 1
        if len(self.skipped_directories) < MAX_LISTED_SKIPS:
            self.skipped_directories.append(rel)

    def annotate(self, budget: Budget) -> None:
        if self.withheld:
            budget.incomplete(f"{self.withheld} path(s) withheld by policy")
        if self.unreadable:
            budget.incomplete(f"{self.unreadable} director(ies) could not be read")

    def to_dict(self) -> dict[str, Any]:
        return {
            "skipped_directories": self.skipped_directories,
            "skipped_directory_count": self.skipped_count,
        }


def load_frames(ctx: ToolContext, start: RelPath) -> list[IgnoreFrame]:
    """The .gitignore rules of the root and every ancestor of ``start``."""
    frames: list[IgnoreFrame] = []
    if not start.parts:
        return frames
    from tools.ignore import IgnoreFrame, read_gitignore

    for depth in range(len(start.parts)):
        rel = RelPath(start.parts[:depth])
        try:
            with ctx.workspace.directory(rel) as fd:
                rules = read_gitignore(fd)
        except Exception:
            continue
        if rules:
            frames.append(IgnoreFrame(rel.parts, rules))
    return frames


def inside_excluded(parts: tuple[str, ...]) -> bool:
    return any(p in EXCLUDED_DIRS for p in parts)


def _push_gitignore(fd: int, parts: tuple[str, ...], frames: list[IgnoreFrame]) -> int:
    from tools.ignore import IgnoreFrame, read_gitignore

    rules = read_gitignore(fd)
    if not rules:
        return 0
    frames.append(IgnoreFrame(parts, rules))
    return 1


# What tools._native lists of a directory: (files, subdirs, symlinks, entries).
Listing = tuple[list[str], list[str], int, int]


class HeldDirectories:
    """Directories handed to tools._native work that outlives the walk's visit:
    ``pairs`` of (duplicated fd, names); ``close()`` once that work is done."""

    __slots__ = ("count", "pairs")

    def __init__(self) -> None:
        self.pairs: list[tuple[int, list[str]]] = []
        self.count = 0  # names in all

    def hold(self, fd: int, names: list[str]) -> None:
        self.pairs.append((os.dup(fd), names))
        self.count += len(names)

    def close(self) -> None:
        for fd, _ in self.pairs:
            os.close(fd)
        self.pairs.clear()


class Walker:
    __slots__ = (
        "allow_names",
        "budget",
        "ctx",
        "prune",
        "report",
        "root_state",
        "sort_files",
        "start",
        "step",
    )

    def __init__(
        self,
        ctx: ToolContext,
        start: RelPath,
        budget: Budget,
        prune: Prune | None = None,
        allow_names: frozenset[str] = frozenset(),
        step: Step | None = None,
        root_state: Any = None,
        sort_files: bool = True,
    ) -> None:
        self.ctx = ctx
        self.start = start
        self.budget = budget
        self.prune = prune
        self.allow_names = allow_names
        self.report = WalkReport()
        self.step = step
        self.root_state = root_state
        self.sort_files = sort_files  # glob orders by mtime: it needs no name order

    def directories(self) -> Iterator[Visit]:
        """Yield ``(dir_fd, parts, prefix, file_names, state)`` per directory walked,
        depth first in name order (files sorted by name, unless ``sort_files`` is
        off: then in listing order).

        ``parts`` is the directory's workspace-relative path and ``prefix`` the same
        joined with a trailing '/' ('' at the root); ``state`` is what ``step``
        gave for it (``root_state`` for the start). The fd is valid only until the
        next item is requested.
        """
        frames = load_frames(self.ctx, self.start)
        keep_excluded = inside_excluded(self.start.parts)
        budget, report = self.budget, self.report
        fd = self.ctx.workspace.open_dir(self.start)
        if not budget.take_directory():
            os.close(fd)
            return
        open_, close = os.open, os.close  # looked up per walk (tests spy on os.open)
        lib = native.NATIVE
        listing: Listing | None = None
        parts = self.start.parts
        prefix = "/".join(parts) + "/" if parts else ""
        state = self.root_state
        # One frame per open directory: [fd, parts, prefix, subdirs, states, next, pushed]
        stack: list[list[Any]] = []
        current = fd
        try:
            while True:
                files, subdirs, states, pushed = self._scan(
                    fd, parts, prefix, state, frames, keep_excluded, listing
                )
                yield fd, parts, prefix, files, state
                current = -1
                if subdirs:
                    stack.append([fd, parts, prefix, subdirs, states, 0, pushed])
                else:
                    close(fd)
                    if pushed:
                        frames.pop()
                while stack:
                    top = stack[-1]
                    index = top[5]
                    subdirs = top[3]
                    if index >= len(subdirs):
                        stack.pop()
                        close(top[0])
                        if top[6]:
                            frames.pop()
                        continue
                    top[5] = index + 1
                    if budget.stopped or budget.out_of_time():
                        return
                    name = subdirs[index]
                    try:
                        if lib is not None:  # opened as below, and listed, in one call
                            sub, listing = lib.open_listdir(top[0], name)
                        else:
                            sub = open_(name, _DIR_FLAGS, dir_fd=top[0])
                    except OSError:
                        report.unreadable += 1
                        continue
                    if not budget.take_directory():
                        close(sub)
                        return
                    fd = current = sub
                    parts = (*top[1], name)
                    prefix = top[2] + name + "/"
                    state = None if top[4] is None else top[4][index]
                    break
                else:
                    return
        finally:
            if current >= 0:  # yielded, then abandoned before it was put on the stack
                close(current)
            for item in stack:
                close(item[0])

    def _scan(
        self,
        fd: int,
        parts: tuple[str, ...],
        prefix: str,
        state: Any,
        frames: list[IgnoreFrame],
        keep_excluded: bool,
        listing: Listing | None,
    ) -> tuple[list[str], list[str], list[Any] | None, int]:
        """Classify one directory's entries (by d_type: no stat per entry)."""
        report = self.report
        try:
            files, subdirs = self._entries(fd, listing)
        except OSError:
            report.unreadable += 1
            return [], [], None, 0
        pushed = _push_gitignore(fd, parts, frames) if ".gitignore" in files else 0
        ws = self.ctx.workspace
        if self.ctx.authorize_path is not None or ws.deny is not None or ws.guard is not None:
            files = self._allowed(prefix, files)
            subdirs = self._allowed(prefix, subdirs)
        if frames:
            from tools.ignore import unignored_files

            files = unignored_files(frames, parts, files)
        if self.sort_files:
            files.sort()
        if not subdirs:
            return files, subdirs, None, pushed
        kept: list[str] = []
        prune, allow = self.prune, self.allow_names
        base = len(self.start.parts)
        for name in subdirs:  # listing order: skips are reported in it, as always
            if not keep_excluded and name not in allow and self._excluded(parts, name, frames):
                report.skip(prefix + name)
                continue
            if prune is not None and prune((*parts, name)[base:]):
                continue
            kept.append(name)
        kept.sort()
        step = self.step
        if step is None:
            return files, kept, None, pushed
        names: list[str] = []
        states: list[Any] = []
        for name in kept:
            child = step(state, name)
            if child is not None:
                names.append(name)
                states.append(child)
        return files, names, states, pushed

    def _entries(self, fd: int, listing: Listing | None) -> tuple[list[str], list[str]]:
        """The files and subdirectories of one directory, within the entry bound
        (``listing``: what open_listdir read, if it did)."""
        budget, report = self.budget, self.report
        room = budget.limits.max_entries - budget.entries
        lib = native.NATIVE
        if listing is None and lib is not None:
            listing = lib.listdir(fd)
        if listing is not None:
            files, subdirs, symlinks, total = listing
            if total <= room:
                budget.entries += total
                report.symlinks += symlinks
                return files, subdirs
        # The Python path, and the entry limit falling inside this directory (where
        # the entries kept are the first ``room`` in listing order).
        files, subdirs = [], []
        entries = list(os.scandir(fd))
        if len(entries) > room:
            entries = entries[: max(room, 0)]
            budget.stop(f"entry limit ({budget.limits.max_entries}) reached")
        budget.entries += len(entries)
        add_file, add_dir = files.append, subdirs.append
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    add_file(entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    add_dir(entry.name)
                elif entry.is_symlink():
                    report.symlinks += 1
            except OSError:
                continue
        return files, subdirs

    @staticmethod
    def _excluded(parts: tuple[str, ...], name: str, frames: list[IgnoreFrame]) -> bool:
        if name in EXCLUDED_DIRS:
            return True
        if not frames:
            return False
        from tools.ignore import is_ignored

        return is_ignored(frames, (*parts, name), True)

    def _allowed(self, prefix: str, names: list[str]) -> list[str]:
        ws, hook = self.ctx.workspace, self.ctx.authorize_path
        kept = [n for n in names if visible(ws, hook, prefix + n)]
        self.report.withheld += len(names) - len(kept)
        return kept
