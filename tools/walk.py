"""A bounded, descriptor-relative directory walk shared by glob and search.

Directories are opened one segment at a time from their parent's descriptor
with ``O_NOFOLLOW``; symlinks are never followed; excluded and .gitignore'd
directories are skipped (and reported), denied paths are withheld (and counted).
At most one descriptor per level of depth is open at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tools.context import Access, ToolContext
from tools.ignore import IgnoreFrame, is_ignored, read_gitignore
from tools.limits import Budget
from tools.workspace import _DIR_FLAGS, EXCLUDED_DIRS, RelPath, ask

MAX_LISTED_SKIPS = 50

Prune = Callable[[tuple[str, ...]], bool]


@dataclass(slots=True)
class WalkReport:
    skipped_directories: list[str] = field(default_factory=list)
    skipped_count: int = 0
    withheld: int = 0
    symlinks: int = 0
    unreadable: int = 0

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


@dataclass(slots=True)
class Walker:
    ctx: ToolContext
    start: RelPath
    budget: Budget
    prune: Prune | None = None
    allow_names: frozenset[str] = frozenset()
    report: WalkReport = field(default_factory=WalkReport)

    def directories(self) -> Iterator[tuple[int, tuple[str, ...], list[str]]]:
        """Yield ``(dir_fd, parts, file_names)`` for each directory walked.

        ``parts`` is the directory's workspace-relative path; the fd is valid only
        until the next item is requested.
        """
        frames = load_frames(self.ctx, self.start)
        keep_excluded = inside_excluded(self.start.parts)
        root_fd = self.ctx.workspace.open_dir(self.start)
        if not self.budget.take_directory():
            os.close(root_fd)
            return
        stack: list[tuple[int, tuple[str, ...], Iterator[str], int]] = []
        try:
            fd, parts = root_fd, self.start.parts
            while True:
                files, subdirs, pushed_frame = self._scan(fd, parts, frames, keep_excluded)
                yield fd, parts, files
                stack.append((fd, parts, iter(subdirs), pushed_frame))
                nxt = self._next_dir(stack, frames)
                if nxt is None:
                    return
                fd, parts = nxt
        finally:
            for item in stack:
                os.close(item[0])

    def _next_dir(
        self,
        stack: list[tuple[int, tuple[str, ...], Iterator[str], int]],
        frames: list[IgnoreFrame],
    ) -> tuple[int, tuple[str, ...]] | None:
        while stack:
            fd, parts, subdirs, pushed = stack[-1]
            for name in subdirs:
                if self.budget.stopped or self.budget.out_of_time():
                    return None
                child = (*parts, name)
                try:
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    self.report.unreadable += 1
                    continue
                if not self.budget.take_directory():
                    os.close(sub)
                    return None
                return sub, child
            stack.pop()
            os.close(fd)
            if pushed:
                frames.pop()
        return None

    def _scan(
        self, fd: int, parts: tuple[str, ...], frames: list[IgnoreFrame], keep_excluded: bool
    ) -> tuple[list[str], list[str], int]:
        """Classify one directory's entries (by d_type: no stat per entry)."""
        files: list[str] = []
        subdirs: list[str] = []
        try:
            entries = list(os.scandir(fd))
        except OSError:
            self.report.unreadable += 1
            return files, subdirs, 0
        room = self.budget.limits.max_entries - self.budget.entries
        if len(entries) > room:
            entries = entries[: max(room, 0)]
            self.budget.stop(f"entry limit ({self.budget.limits.max_entries}) reached")
        self.budget.entries += len(entries)
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    files.append(entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.name)
                elif entry.is_symlink():
                    self.report.symlinks += 1
            except OSError:
                continue
        pushed = 0
        if ".gitignore" in files:
            rules = read_gitignore(fd)
            if rules:
                frames.append(IgnoreFrame(parts, rules))
                pushed = 1
        prefix = "/".join(parts) + "/" if parts else ""
        if self.ctx.authorize_path is not None:
            files = self._allowed(prefix, files)
            subdirs = self._allowed(prefix, subdirs)
        if frames:
            files = [f for f in files if not is_ignored(frames, (*parts, f), False)]
        subdirs = [d for d in subdirs if self._descend(parts, d, frames, keep_excluded, prefix)]
        files.sort()
        subdirs.sort()
        return files, subdirs, pushed

    def _allowed(self, prefix: str, names: list[str]) -> list[str]:
        hook = self.ctx.authorize_path
        assert hook is not None
        kept = [n for n in names if ask(hook, prefix + n, Access.READ)]
        self.report.withheld += len(names) - len(kept)
        return kept

    def _descend(
        self,
        parts: tuple[str, ...],
        name: str,
        frames: list[IgnoreFrame],
        keep_excluded: bool,
        prefix: str,
    ) -> bool:
        child = (*parts, name)
        if (
            not keep_excluded
            and name not in self.allow_names
            and (name in EXCLUDED_DIRS or (frames and is_ignored(frames, child, True)))
        ):
            self.report.skip(prefix + name)
            return False
        return self.prune is None or not self.prune(child[len(self.start.parts) :])
