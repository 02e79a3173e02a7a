"""search_files: RE2 regex or literal search over the workspace, bounded.

With tools._native, a tree is searched by search_native.py (reads on native
threads, overlapping the walk); a single file, and everything without the
native module, takes the pure-Python path here, which the tests hold the native
one to.

On that path the calling thread walks and reads. With a required literal, each file is
checked for it as it is read (while most files turn out not to hold it) and the
scan runs inline; without one, batches go to one worker thread whose RE2 scans
run without the GIL. Results are merged back in walk order, so the matches are
deterministic.

Measured on 2 cores and kept out: a second thread reading or matching (any
split of the per-file or per-hit Python work between two threads was 30-80%
slower: the GIL changes hands at every syscall), and reading into recycled
buffers with readv instead of a bytes object per file (no gain end to end).
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from tools import native
from tools.context import Access, ToolContext
from tools.glob import Matcher, compile_pattern
from tools.limits import Budget
from tools.regex import compile_pattern as compile_regex
from tools.regex import required_literal
from tools.result import ToolResult, register_formatter
from tools.scan import (
    BATCH_BYTES,
    BINARY_PROBE,
    LONG_LINE,
    Batch,
    ContentMatcher,
    Hit,
    Tally,
    is_binary,
)
from tools.tooldef import ToolDef, offloaded
from tools.walk import Walker
from tools.workspace import RelPath, lookup

if TYPE_CHECKING:
    import threading

NAME = "search_files"
DESCRIPTION = (
    "Search file contents with an RE2 regular expression (or plain text with "
    "`literal: true`). Returns matching lines as path:line:text, with `context` lines "
    "around each. `include` is a glob filter ('*.py' matches names anywhere; a pattern "
    "with '/' matches paths). At most `max_results` lines (default 100). Backreferences "
    "and lookaround are not available. `coverage` says whether every file was searched."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "RE2 regex, or text when literal."},
        "path": {"type": "string", "description": "File or directory to search; default '.'."},
        "literal": {"type": "boolean", "description": "Treat pattern as plain text."},
        "include": {"type": "string", "description": "Glob of files to search, e.g. '*.py'."},
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 20,
            "description": "Lines of context before and after each match.",
        },
        "max_results": {"type": "integer", "minimum": 1, "description": "Default 100."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


class SearchArgs(NamedTuple):
    pattern: str
    path: str = "."
    literal: bool = False
    include: str | None = None
    context: int = 0
    max_results: int | None = None

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> SearchArgs:
        return cls(
            args["pattern"],
            args.get("path", "."),
            bool(args.get("literal", False)),
            args.get("include"),
            int(args.get("context", 0)),
            args.get("max_results"),
        )


class Include:
    """The `include` filter: a name glob, or a path glob that also prunes."""

    def __init__(self, pattern: str | None) -> None:
        self.path_matcher: Matcher | None = None
        self.name_matcher: Matcher | None = None
        if pattern is None:
            return
        matcher = Matcher(compile_pattern(pattern))
        if "/" in pattern.strip("/"):
            self.path_matcher = matcher
        else:
            self.name_matcher = matcher

    def names(self, parts: tuple[str, ...], names: list[str]) -> list[str]:
        if self.path_matcher is not None:
            state = self.path_matcher.state_for(parts)
            return [n for n in names if self.path_matcher.file_matches(state, n)]
        if self.name_matcher is not None:
            root = self.name_matcher.states[()]
            return [n for n in names if self.name_matcher.file_matches(root, n)]
        return names


def single_file(ctx: ToolContext, start: RelPath) -> bool:
    if not start.parts:
        return False
    with ctx.workspace.directory(start.parent) as parent:
        st = lookup(parent, start.name)
    return st is not None and stat.S_ISREG(st.st_mode)


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
Scan = tuple[list[Hit], Tally, int]
Pending = deque["Task"]


class Task:
    """One submitted scan; ``result()`` waits for it and re-raises its error."""

    __slots__ = ("args", "error", "finished", "value")

    def __init__(self, args: tuple[Any, ...], finished: threading.Event) -> None:
        self.args = args
        self.value: Scan | None = None
        self.error: BaseException | None = None
        self.finished = finished

    def done(self) -> bool:
        return self.finished.is_set()

    def result(self) -> Scan:
        self.finished.wait()
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


class Worker:
    """One background thread running scans in submission order: the executor this
    needs, without concurrent.futures (which imports logging: ~7 ms per one-shot
    run, measured with -X importtime)."""

    def __init__(self, scan: Callable[[Batch, int], Scan]) -> None:
        import threading
        from _queue import SimpleQueue

        self.scan = scan
        self.event = threading.Event
        self.tasks: SimpleQueue[Task | None] = SimpleQueue()
        self.thread = threading.Thread(target=self.run, name="search", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while (task := self.tasks.get()) is not None:
            try:
                task.value = self.scan(*task.args)
            except BaseException as exc:  # handed to the caller by result()
                task.error = exc
            finally:
                task.finished.set()

    def submit(self, batch: Batch, limit: int) -> Task:
        task = Task((batch, limit), self.event())
        self.tasks.put(task)
        return task

    def shutdown(self) -> None:
        self.tasks.put(None)
        self.thread.join()


# The literal is checked per file as it is read, until more than half of the
# first PROBE_FILES files turn out to hold it: then the per-batch scan alone is
# cheaper than scanning every file twice (measured on the bench tree).
PROBE_FILES = 256


def hit_size(hit: Hit) -> int:
    """What one hit counts against the output bound."""
    size = len(hit["path"]) + len(hit["text"]) + 12
    if "before" in hit:
        size += sum(len(t) + 8 for _, t in (*hit["before"], *hit["after"]))
    return size


def search_files(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = SearchArgs.from_dict(raw_args)
    ws = ctx.workspace
    start = ws.parse(args.path)
    regex = compile_regex(args.pattern, literal=args.literal)
    literal = required_literal(args.pattern, literal=args.literal)
    matcher = ContentMatcher(regex, literal, max(0, min(args.context, 20)), exact=args.literal)
    include = Include(args.include)
    ws.authorize(start, Access.READ, ctx.authorize_path)
    run = SearchRun(ctx, matcher, Budget(ctx.limits), args.max_results or ctx.limits.max_results)
    run.probing = matcher.contains is not None
    report: dict[str, Any] = {"skipped_directories": [], "skipped_directory_count": 0}
    if single_file(ctx, start):
        lib = native.NATIVE
        with ws.directory(start.parent) as parent:
            if lib is not None:
                from tools.search_native import search_file

                search_file(run, lib, parent, start.name, start.text)
            else:
                run.read_into(parent, start.name, start.text)
        run.flush(None)
    else:
        report = run.run_tree(start, include)
    return ToolResult.success(NAME, run.result(args, start, report))


class SearchRun:
    """One search's state: its bounds, the hits taken so far and the batch being read."""

    __slots__ = (
        "batch",
        "budget",
        "ctx",
        "done",
        "hits",
        "kept",
        "matcher",
        "max_results",
        "probed",
        "probing",
        "saturated",
        "tally",
    )

    def __init__(
        self, ctx: ToolContext, matcher: ContentMatcher, budget: Budget, max_results: int
    ) -> None:
        self.ctx = ctx
        self.matcher = matcher
        self.budget = budget
        self.max_results = max_results
        self.hits: list[Hit] = []
        self.tally = Tally()
        self.batch = Batch()
        self.done = False  # stop reading: a bound was reached
        self.saturated = False  # no more hits can be taken (max_results or the output bound)
        self.probing = False  # check each file for the literal as it is read
        self.probed = 0
        self.kept = 0

    def read_into(self, dir_fd: int, name: str, shown: str) -> None:
        self.read_files(dir_fd, "", [name], lambda: None, shown=shown)

    def read_files(
        self,
        dir_fd: int,
        prefix: str,
        names: list[str],
        full: Callable[[], None],
        shown: str | None = None,
    ) -> None:
        """Read files of one directory into the batch (never following links,
        skipping special files); ``full()`` is called whenever the batch fills.
        The hot loop of a search: locals only, no per-file method calls."""
        open_, fstat, read, close = os.open, os.fstat, os.read, os.close
        budget, tally = self.budget, self.tally
        contains = self.matcher.contains if self.probing else None
        for name in names:
            try:
                fd = open_(name, _READ_FLAGS, dir_fd=dir_fd)
            except OSError:
                tally.unreadable += 1
                continue
            try:
                st = fstat(fd)
                size = st.st_size
                if not stat.S_ISREG(st.st_mode):
                    continue
                if not budget.take_file(size):
                    if budget.stopped:
                        self.done = True
                        return
                    continue
                data = read(fd, size + 1 if size <= BINARY_PROBE else BINARY_PROBE)
                binary = is_binary(data)
                if not binary and len(data) == BINARY_PROBE < size:  # the probe, then the rest
                    data += read(fd, size + 1 - BINARY_PROBE)
                if not binary and len(data) > size:  # grew while we read: take the rest too
                    data += read_rest(fd)
            except OSError:
                tally.unreadable += 1
                continue
            finally:
                close(fd)
            tally.files += 1
            if binary:  # (a NUL in the first 8 KiB: the rest was never read, as rg does)
                tally.binary += 1
                continue
            batch = self.batch
            batch.size += len(data) + 1  # bytes read, kept or not: flushes as often
            if contains is None:
                batch.paths.append(shown or prefix + name)
                batch.chunks.append(data)
            else:
                self.probed += 1
                if contains(data):
                    self.kept += 1
                    batch.paths.append(shown or prefix + name)
                    batch.chunks.append(data)
            if batch.size >= BATCH_BYTES:
                full()
                if self.done:
                    return
                contains = self.matcher.contains if self.probing else None

    def flush(self, pool: Worker | None, pending: Pending | None = None) -> None:
        if self.probing and self.probed >= PROBE_FILES and self.kept * 2 > self.probed:
            self.probing = False  # most files hold the literal: stop checking each one
        batch, self.batch = self.batch, Batch()
        if not batch.chunks:
            return
        limit = self.max_results - len(self.hits) + 1
        if pool is None or pending is None:
            self.take(*self.matcher.search(batch, limit))
        else:
            pending.append(pool.submit(batch, limit))

    def run_tree(self, start: RelPath, include: Include) -> dict[str, Any]:
        prune = include.path_matcher.prune if include.path_matcher else None
        walker = Walker(self.ctx, start, self.budget, prune=prune)
        lib = native.NATIVE
        if lib is not None:
            from tools.search_native import search_tree

            search_tree(self, lib, walker, include)
        else:
            self.read_tree(walker, include)
        walker.report.annotate(self.budget)
        return walker.report.to_dict()

    def read_tree(self, walker: Walker, include: Include) -> None:
        """The pure-Python path. One worker thread, and only for regexes without a
        required literal: then the RE2 scan (GIL-free) dominates and overlaps with
        reading; with a literal the per-hit work is Python and a thread only adds
        GIL contention (a second worker did not help either; measured, 2 cores)."""
        workers = 1
        pending: Pending = deque()
        pool = Worker(self.matcher.search) if self.matcher.scan_heavy else None
        base = len(walker.start.parts)

        def full() -> None:
            self.flush(pool, pending)
            self.collect(pending, workers + 1)

        try:
            for fd, parts, prefix, names, _ in walker.directories():
                self.read_files(fd, prefix, include.names(parts[base:], names), full)
                if self.done or self.budget.out_of_time():
                    break
            if not self.saturated:  # what was read before a bound stopped the walk
                self.flush(pool, pending)
        finally:
            try:
                self.collect(pending, 0)
            finally:
                if pool is not None:
                    pool.shutdown()

    def collect(self, pending: Pending, keep: int) -> None:
        """Merge finished batches in order, waiting while more than ``keep`` are queued."""
        while pending and (len(pending) > keep or pending[0].done()):
            self.take(*pending.popleft().result())

    def take(self, hits: list[Hit], tally: Tally, size: int) -> None:
        """Accept a batch's hits (``size``: their output cost) within the bounds."""
        self.tally.add(tally)
        if self.saturated:
            return
        room = self.max_results - len(self.hits)
        accepted = hits
        if len(hits) > room:
            accepted = hits[:room]
            size = sum(map(hit_size, accepted))
        if self.budget.take_output(size):
            self.hits.extend(accepted)
        else:  # the output limit falls inside this batch: take what fits
            for hit in accepted:
                if not self.budget.take_output(hit_size(hit)):
                    break
                self.hits.append(hit)
            self.done = self.saturated = True
        if len(hits) > room:
            self.budget.stop(f"max_results ({self.max_results}) reached; more matches exist")
            self.done = self.saturated = True

    def result(self, args: SearchArgs, start: RelPath, report: dict[str, Any]) -> dict[str, Any]:
        tally = self.tally
        if tally.long_lines:
            self.budget.incomplete(f"{tally.long_lines} line(s) over {LONG_LINE} bytes skipped")
        if tally.unreadable:
            self.budget.incomplete(f"{tally.unreadable} file(s) could not be read")
        return {
            "pattern": args.pattern,
            "path": start.text,
            "matches": self.hits,
            "files_searched": tally.files,
            "files_matched": tally.matched_files,
            "skipped": {"binary_files": tally.binary, "long_lines": tally.long_lines},
            "coverage": self.budget.coverage(),
            **report,
        }


# What is read of a file past the size fstat gave, at most: a file still being
# written (or one on a filesystem that never says EOF) must not hold the search.
GROWTH_READ = 1 << 20


def read_rest(fd: int) -> bytes:
    chunks = []
    left = GROWTH_READ
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def format_text(data: dict[str, Any]) -> str:
    out: list[str] = []
    shown: set[tuple[str, int]] = set()
    for m in data["matches"]:
        path = m["path"]
        rows = (
            [(n, "-", t) for n, t in m.get("before", [])]
            + [(m["line"], ":", m["text"])]
            + [(n, "-", t) for n, t in m.get("after", [])]
        )
        for n, sep, text in rows:
            if (path, n) in shown and sep == "-":
                continue
            shown.add((path, n))
            out.append(f"{path}{sep}{n}{sep}{text}")
    if not out:
        out.append(f"(no matches for {data['pattern']!r})")
    cov = data["coverage"]
    summary = (
        f"[{len(data['matches'])} match(es) in {data['files_matched']} file(s); "
        f"{data['files_searched']} searched"
    )
    skipped = data["skipped"]
    if skipped["binary_files"]:
        summary += f"; {skipped['binary_files']} binary skipped"
    summary += "]" if cov["complete"] else "; coverage PARTIAL: " + "; ".join(cov["reasons"]) + "]"
    out.append(summary)
    return "\n".join(out)


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=True,
    replay_safe=True,
    run=offloaded(NAME, search_files),
    run_sync=search_files,
)
