"""search_files: RE2 regex or literal search over the workspace, bounded.

Files are read whole; a literal every match must contain is looked for in the
file's bytes first, and only lines holding it meet the regex. RE2 releases the
GIL, so a small thread pool searches directories in parallel while the walk
goes on; results are merged back in walk order.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tools.context import Access, ToolContext
from tools.glob import Matcher, compile_pattern
from tools.limits import Budget
from tools.regex import compile_pattern as compile_regex
from tools.regex import required_literal
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.walk import Walker
from tools.workspace import RelPath, lookup

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
LONG_LINE = 8 * 1024
BINARY_PROBE = 8 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class SearchArgs:
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


@dataclass(slots=True)
class Tally:
    files: int = 0
    matched_files: int = 0
    binary: int = 0
    long_lines: int = 0
    unreadable: int = 0

    def add(self, other: Tally) -> None:
        self.files += other.files
        self.matched_files += other.matched_files
        self.binary += other.binary
        self.long_lines += other.long_lines
        self.unreadable += other.unreadable


Hit = tuple[str, int, str, list[tuple[int, str]], list[tuple[int, str]]]


def _line(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", "replace").rstrip("\r")


class FileSearcher:
    """Searches one file's bytes; thread-safe (holds only immutable state)."""

    def __init__(self, regex: Any, literal: bytes | None, context: int, *, exact: bool) -> None:
        import re2

        self.exact = exact  # the pattern is the literal itself: no regex check needed
        self.match = regex._regexp.Match
        self.unanchored = re2._Anchor.UNANCHORED
        self.literal = literal
        self.find_literal = None
        if literal:
            options = re2.Options()
            options.literal = True
            options.never_capture = True
            self.find_literal = re2.compile(literal, options)._regexp.Match
        self.context = context

    def lines(self, data: bytes, tally: Tally, limit: int) -> list[tuple[int, int]]:
        """(line_start, line_end) of matching lines, in order, at most ``limit``."""
        out: list[tuple[int, int]] = []
        size = len(data)
        finder, match, anchor = self.find_literal, self.match, self.unanchored
        pos = 0
        while pos <= size and len(out) < limit:
            span = (finder or match)(anchor, data, pos, size)[0]
            if span[0] < 0:
                break
            start = data.rfind(b"\n", 0, span[0]) + 1
            end = data.find(b"\n", span[0])
            if end < 0:
                end = size
            if end - start > LONG_LINE:
                tally.long_lines += 1
            elif (span[1] <= end and (finder is None or self.exact)) or match(
                anchor, data, start, end
            )[0][0] >= 0:
                out.append((start, end))
            pos = end + 1
        return out

    def context_lines(
        self, data: bytes, start: int, end: int, number: int
    ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        before: list[tuple[int, str]] = []
        pos = start
        for k in range(1, self.context + 1):
            if pos == 0:
                break
            prev = data.rfind(b"\n", 0, pos - 1) + 1
            before.append((number - k, _line(data, prev, pos - 1)[:LONG_LINE]))
            pos = prev
        before.reverse()
        after: list[tuple[int, str]] = []
        pos = end + 1
        for k in range(1, self.context + 1):
            if pos > len(data) or (pos == len(data)):
                break
            nxt = data.find(b"\n", pos)
            nxt = len(data) if nxt < 0 else nxt
            after.append((number + k, _line(data, pos, nxt)[:LONG_LINE]))
            pos = nxt + 1
        return before, after

    def search(self, data: bytes, shown: str, tally: Tally, limit: int) -> list[Hit]:
        if (
            self.find_literal is not None
            and self.find_literal(self.unanchored, data, 0, len(data))[0][0] < 0
        ):
            return []
        if data.find(b"\x00", 0, BINARY_PROBE) >= 0:
            tally.binary += 1
            return []
        spans = self.lines(data, tally, limit)
        if not spans:
            return []
        tally.matched_files += 1
        hits: list[Hit] = []
        number, counted = 1, 0
        for start, end in spans:
            number += data.count(b"\n", counted, start)
            counted = start
            before, after = (
                self.context_lines(data, start, end, number) if self.context else ([], [])
            )
            hits.append((shown, number, _line(data, start, end), before, after))
        return hits


@dataclass(slots=True)
class Job:
    """Search the files of one directory (runs in a worker thread)."""

    searcher: FileSearcher
    budget: Budget
    lock: threading.Lock
    stop: threading.Event
    limit: int
    tally: Tally = field(default_factory=Tally)

    def run(self, dir_fd: int, prefix: str, names: list[str]) -> list[Hit]:
        hits: list[Hit] = []
        try:
            for name in names:
                if self.stop.is_set() or len(hits) >= self.limit:
                    break
                data = self.read(dir_fd, name)
                if data is not None:
                    hits.extend(
                        self.searcher.search(
                            data, prefix + name, self.tally, self.limit - len(hits)
                        )
                    )
        finally:
            os.close(dir_fd)
        return hits

    def read(self, dir_fd: int, name: str) -> bytes | None:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError:
            self.tally.unreadable += 1
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            with self.lock:
                if self.budget.stopped or not self.budget.take_file(st.st_size):
                    self.stop.set()
                    return None
            self.tally.files += 1
            return read_whole(fd, st.st_size)
        except OSError:
            self.tally.unreadable += 1
            return None
        finally:
            os.close(fd)


def read_whole(fd: int, size: int) -> bytes:
    data = os.read(fd, size + 1) if size else b""
    if len(data) <= size:
        return data
    chunks = [data]
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


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


def search_files(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = SearchArgs.from_dict(raw_args)
    ws = ctx.workspace
    start = ws.parse(args.path)
    regex = compile_regex(args.pattern, literal=args.literal)
    searcher = FileSearcher(
        regex,
        required_literal(args.pattern, literal=args.literal),
        max(0, min(args.context, 20)),
        exact=args.literal,
    )
    include = Include(args.include)
    ws.authorize(start, Access.READ, ctx.authorize_path)
    budget = Budget(ctx.limits)
    max_results = args.max_results or ctx.limits.max_results
    run = SearchRun(ctx, searcher, budget, max_results)
    if single_file(ctx, start):
        run.run_file(start)
        report: dict[str, Any] = {"skipped_directories": [], "skipped_directory_count": 0}
    else:
        report = run.run_tree(start, include)
    return ToolResult.success(NAME, run.result(args, start, report))


@dataclass(slots=True)
class SearchRun:
    ctx: ToolContext
    searcher: FileSearcher
    budget: Budget
    max_results: int
    hits: list[Hit] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def job(self) -> Job:
        return Job(self.searcher, self.budget, self.lock, self.stop, self.max_results + 1)

    def run_file(self, rel: RelPath) -> None:
        with self.ctx.workspace.directory(rel.parent) as parent:
            job = self.job()
            self.take(job.run(os.dup(parent), "/".join((*rel.parent.parts, "")), [rel.name]))
            self.tally.add(job.tally)

    def run_tree(self, start: RelPath, include: Include) -> dict[str, Any]:
        prune = include.path_matcher.prune if include.path_matcher else None
        walker = Walker(self.ctx, start, self.budget, prune=prune)
        base = len(start.parts)
        workers = max(1, min(4, os.cpu_count() or 1))
        pending: deque[tuple[Job, Future[list[Hit]]]] = deque()
        with ThreadPoolExecutor(workers, thread_name_prefix="search") as pool:
            try:
                for fd, parts, names in walker.directories():
                    names = include.names(parts[base:], names)
                    if names:
                        job = self.job()
                        prefix = "/".join(parts) + "/" if parts else ""
                        pending.append((job, pool.submit(job.run, os.dup(fd), prefix, names)))
                    while len(pending) > 2 * workers or (pending and pending[0][1].done()):
                        self.collect(pending.popleft())
                    if self.stop.is_set() or self.budget.out_of_time():
                        break
            finally:
                while pending:
                    self.collect(pending.popleft())
        walker.report.annotate(self.budget)
        return walker.report.to_dict()

    def collect(self, item: tuple[Job, Future[list[Hit]]]) -> None:
        job, future = item
        hits = future.result()
        self.tally.add(job.tally)
        self.take(hits)

    def take(self, hits: list[Hit]) -> None:
        for hit in hits:
            if len(self.hits) >= self.max_results:
                self.budget.stop(f"max_results ({self.max_results}) reached; more matches exist")
                self.stop.set()
                return
            size = len(hit[0]) + len(hit[2]) + 12 + sum(len(t) + 8 for _, t in hit[3] + hit[4])
            if not self.budget.take_output(size):
                self.stop.set()
                return
            self.hits.append(hit)

    def result(self, args: SearchArgs, start: RelPath, report: dict[str, Any]) -> dict[str, Any]:
        tally = self.tally
        if tally.long_lines:
            self.budget.incomplete(
                f"{tally.long_lines} line(s) over {LONG_LINE} bytes not searched"
            )
        if tally.unreadable:
            self.budget.incomplete(f"{tally.unreadable} file(s) could not be read")
        matches = [
            {
                "path": p,
                "line": n,
                "text": t,
                **(
                    {"before": [list(b) for b in before], "after": [list(a) for a in after]}
                    if before or after
                    else {}
                ),
            }
            for p, n, t, before, after in self.hits
        ]
        return {
            "pattern": args.pattern,
            "path": start.text,
            "matches": matches,
            "files_searched": tally.files,
            "files_matched": tally.matched_files,
            "skipped": {"binary_files": tally.binary, "long_lines": tally.long_lines},
            "coverage": self.budget.coverage(),
            **report,
        }


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
