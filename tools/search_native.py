"""search_files over tools._native: reads in the background, overlapping the walk.

The walk queues directories until GROUP_FILES files wait. Then a Reader is
started for them (its threads open, check and read while this thread goes on);
once DEPTH Readers are under way, the oldest is waited for, its tallies taken
into the search's budget, and its kept files scanned here. So the walk and the
scan, which hold the GIL, run while the reads, which do not, go on: on 2 cores
this nearly doubles the CPU a search can use (measured with perf stat on the
bench tree). The Readers share one tools._native.Budget and take their turns at
it in walk order, so the bounds fall exactly where one reader would put them.

Each directory's descriptor is duplicated until its group has been read (the
walk closes its own as it goes). DEPTH + 1 groups are open at a time, each
with at most GROUP_DIRS directory fds, and each Reader holds at most
GROUP_FILES file fds: about 450 descriptors in all, within the common
RLIMIT_NOFILE of 1024
(a test runs a search and a glob of 1,500 directories under a limit of 640).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from tools.scan import LONG_LINE, Batch, ContentMatcher, Hit, Tally
from tools.walk import HeldDirectories

if TYPE_CHECKING:
    from tools.limits import Budget
    from tools.walk import Walker


class SearchRun(Protocol):
    """What the native path uses of a search's state (tools.search.SearchRun); named
    here so that this module needs nothing of tools.search, which calls it."""

    budget: Budget
    done: bool
    hits: list[Hit]
    matcher: ContentMatcher
    max_results: int
    saturated: bool
    tally: Tally

    def take(self, hits: list[Hit], tally: Tally, size: int) -> None: ...


class Include(Protocol):
    """The `include` filter (tools.search.Include): the names of a folder it keeps."""

    def names(self, parts: tuple[str, ...], names: list[str]) -> list[str]: ...


GROUP_FILES = 128  # smaller groups pipeline better: 256 measured 5-10% slower
GROUP_DIRS = 64


class Group(HeldDirectories):
    """Directories queued for one Reader, and their path prefixes."""

    __slots__ = ("prefixes",)

    def __init__(self) -> None:
        super().__init__()
        self.prefixes: list[str] = []

    def add(self, fd: int, prefix: str, names: list[str]) -> None:
        self.hold(fd, names)
        self.prefixes.append(prefix)


class Started:
    """A Reader under way and the group it reads."""

    __slots__ = ("group", "reader")

    def __init__(self, reader: Any, group: Group) -> None:
        self.reader = reader
        self.group = group


# Readers under way at once: while one group is scanned here, the next two are
# read (their budget turns still taken in walk order).
DEPTH = 2


def search_tree(run: SearchRun, lib: Any, walker: Walker, include: Include) -> None:
    base = len(walker.start.parts)
    limits = run.budget.limits
    shared = lib.Budget(
        limits.max_files - run.budget.files, limits.max_content_bytes - run.budget.content_bytes
    )
    group, inflight = Group(), deque[Started]()
    try:
        for fd, parts, prefix, names, _ in walker.directories():
            names = include.names(parts[base:], names)
            if not names:
                continue
            group.add(fd, prefix, names)
            if group.count >= GROUP_FILES or len(group.pairs) >= GROUP_DIRS:
                advance(run, lib, shared, inflight, group)
                group = Group()
                if run.done or run.budget.out_of_time():
                    break
        if group.count and not run.done:
            advance(run, lib, shared, inflight, group)
            group = Group()
        while inflight:
            finish(run, inflight[0])
            inflight.popleft()
    finally:
        for started in inflight:  # an error on the way: their threads still use the fds
            started.reader.wait()
            started.group.close()
        group.close()


def search_file(run: SearchRun, lib: Any, dir_fd: int, name: str, shown: str) -> None:
    """One named file, read and scanned by a Reader as a one-file group (so the
    native module has one way to search: Readers)."""
    limits = run.budget.limits
    shared = lib.Budget(
        limits.max_files - run.budget.files, limits.max_content_bytes - run.budget.content_bytes
    )
    group = Group()
    group.add(dir_fd, shown[: len(shown) - len(name)], [name])
    try:
        started = Started(start(run, lib, shared, group), group)
    except BaseException:
        group.close()
        raise
    finish(run, started)


def advance(run: SearchRun, lib: Any, shared: Any, inflight: deque[Started], group: Group) -> None:
    """Start reading ``group``; when DEPTH readers are under way, account for the
    oldest and scan it while the others read."""
    oldest = None
    if len(inflight) >= DEPTH:
        account(run, inflight[0])
        oldest = inflight.popleft()
    if run.done:
        group.close()
    else:
        inflight.append(Started(start(run, lib, shared, group), group))
    if oldest is not None:
        scan(run, oldest)


def finish(run: SearchRun, started: Started) -> None:
    account(run, started)
    scan(run, started)


def start(run: SearchRun, lib: Any, shared: Any, group: Group) -> Any:
    matcher = run.matcher
    return lib.Reader(
        group.pairs,
        matcher.literal_bytes,
        matcher.native_regex(lib),
        shared,
        not matcher.context,  # candidate lines found by the threads: the native scan
        matcher.exact or not matcher.literal_bytes,
        LONG_LINE,
    )


def account(run: SearchRun, started: Started) -> None:
    """Wait for the reads, then take their tallies (and close the group's fds)."""
    try:
        searched, files, size, unreadable, binary, over, stopped = started.reader.wait()
    finally:
        started.group.close()
    budget, tally = run.budget, run.tally
    budget.files += files
    budget.content_bytes += size
    tally.files += searched
    tally.unreadable += unreadable
    tally.binary += binary
    if over:
        budget.content_limit_reached()
    if stopped:
        budget.file_limit_reached()
        run.done = True


def scan(run: SearchRun, started: Started) -> None:
    """The group's kept files searched here: natively, or (with context lines)
    by the Python scan over their bytes."""
    if run.saturated:
        return
    reader, prefixes, matcher = started.reader, started.group.prefixes, run.matcher
    limit = run.max_results - len(run.hits) + 1
    if matcher.context:
        batch = Batch()
        kept = reader.kept()
        for (group, name), data in zip(kept, reader.chunks(), strict=True):
            batch.add(prefixes[group] + name, data)
        run.take(*matcher.search_python(batch, limit))
        return
    literal = matcher.literal_bytes
    find = None if literal else matcher.match
    tally = Tally()
    hits, tally.matched_files, tally.long_lines, out = reader.scan(
        prefixes, find, matcher.match, matcher.anchor, limit
    )
    run.take(hits, tally, out)
