"""search_files over tools._native: reads in the background, overlapping the walk.

The walk queues directories until GROUP_FILES files wait. Then the previous
group's Reader is waited for and its tallies taken into the budget (in walk
order, so the next group's rooms are exact), the next Reader is started (its
threads open, check and read while this thread goes on), and the previous
group's kept files are scanned here. So the walk and the scan, which hold the
GIL, run while the reads, which do not, go on: on 2 cores this nearly doubles
the CPU a search can use (measured with perf stat on the bench tree).

Each directory's descriptor is duplicated until its group has been read (the
walk closes its own as it goes). Two groups are open at a time, each with at
most GROUP_DIRS directory fds, and a Reader holds at most GROUP_FILES file fds
at once: about 256 descriptors in all, well within the common RLIMIT_NOFILE of 1024
(a test runs a search and a glob of 1,500 directories under a limit of 640).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.scan import LONG_LINE, Batch, Tally
from tools.walk import HeldDirectories

if TYPE_CHECKING:
    from tools.search import Include, SearchRun
    from tools.walk import Walker

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


def search_tree(run: SearchRun, lib: Any, walker: Walker, include: Include) -> None:
    base = len(walker.start.parts)
    group, started = Group(), None
    try:
        for fd, parts, prefix, names, _ in walker.directories():
            names = include.names(parts[base:], names)
            if not names:
                continue
            group.add(fd, prefix, names)
            if group.count >= GROUP_FILES or len(group.pairs) >= GROUP_DIRS:
                started, group = advance(run, lib, started, group), Group()
                if run.done or run.budget.out_of_time():
                    break
        if group.count and not run.done:
            started, group = advance(run, lib, started, group), Group()
        if started is not None:
            finish(run, started)
            started = None
    finally:
        if started is not None:  # an error on the way: its threads still use the fds
            started.reader.wait()
            started.group.close()
        group.close()


def advance(run: SearchRun, lib: Any, previous: Started | None, group: Group) -> Started | None:
    """Account for the previous group, start reading ``group``, scan the previous."""
    if previous is not None:
        account(run, previous)
    if run.done:
        group.close()
        started = None
    else:
        started = Started(start(run, lib, group), group)
    try:
        if previous is not None:
            scan(run, previous)
    except BaseException:
        if started is not None:  # its threads use the group's fds: wait, then close
            started.reader.wait()
            started.group.close()
        raise
    return started


def finish(run: SearchRun, started: Started) -> None:
    account(run, started)
    scan(run, started)


def start(run: SearchRun, lib: Any, group: Group) -> Any:
    budget, matcher = run.budget, run.matcher
    limits = budget.limits
    return lib.Reader(
        group.pairs,
        matcher.literal_bytes,
        matcher.native_regex(lib),
        limits.max_files - budget.files,
        limits.max_content_bytes - budget.content_bytes,
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
    paths = [prefixes[group] + name for group, name in reader.kept()]
    if not paths:
        return
    limit = run.max_results - len(run.hits) + 1
    if matcher.context:
        batch = Batch()
        for path, data in zip(paths, reader.chunks(), strict=True):
            batch.add(path, data)
        run.take(*matcher.search_python(batch, limit))
        return
    literal = matcher.literal_bytes
    find = None if literal else matcher.match
    tally = Tally()
    hits, tally.matched_files, tally.long_lines, out = reader.scan(
        paths, find, matcher.match, matcher.anchor, limit
    )
    run.take(hits, tally, out)
