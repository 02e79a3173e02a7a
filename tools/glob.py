"""glob: find files by name pattern, newest first, pruning directories early.

``**`` matches any number of directories, ``*`` and ``?`` never cross ``/``,
``[...]`` is a class and ``{a,b}`` alternation. The pattern is an automaton over
path segments: a directory no state can continue through is never opened.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from tools import native
from tools.context import Access, ToolContext
from tools.limits import Budget
from tools.refusal import RefusalCode, Refused
from tools.result import ToolResult, register_formatter
from tools.tooldef import ToolDef, offloaded
from tools.walk import HeldDirectories, Walker

NAME = "glob"
DESCRIPTION = (
    "Find files whose workspace-relative path matches a glob pattern, newest first. "
    "`**` crosses directories, `*` and `?` stay within one name, `[abc]` and `{a,b}` "
    "work. `path` narrows the search to a directory (the pattern is relative to it). "
    "Directories such as .git, node_modules, .venv and .gitignore'd ones are skipped "
    "unless the pattern names them; they are reported in `skipped_directories`."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "e.g. '**/*.py' or 'src/*.{ts,tsx}'."},
        "path": {"type": "string", "description": "Directory to search from; default '.'."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}
MAX_ALTERNATIVES = 64
STAR = "**"


class GlobArgs:
    __slots__ = ("path", "pattern")

    def __init__(self, pattern: str, path: str = ".") -> None:
        self.pattern = pattern
        self.path = path

    @classmethod
    def from_dict(cls, args: dict[str, Any]) -> GlobArgs:
        return cls(args["pattern"], args.get("path", "."))


def expand_braces(pattern: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    out: list[str] = []
    for option in match.group(1).split(","):
        out.extend(expand_braces(head + option + tail))
        if len(out) > MAX_ALTERNATIVES:
            raise Refused(
                RefusalCode.INVALID_ARGUMENT,
                "the pattern expands to too many alternatives",
                f"use at most {MAX_ALTERNATIVES} brace alternatives",
            )
    return out


def segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (j := segment.find("]", i + 2)) > 0:
            body = segment[i + 1 : j].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body[:1] in "!^" and body else f"[{body}]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


Segment = str | re.Pattern[str]  # "**", a literal name, or a compiled name pattern


def compile_pattern(pattern: str) -> list[tuple[Segment, ...]]:
    if not pattern or "\x00" in pattern or "\\" in pattern:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "pattern is empty or contains NUL/backslash",
            "give a '/'-separated pattern like '**/*.py'",
        )
    if pattern.startswith("/"):
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            "pattern is absolute",
            "patterns are relative to `path` (default the workspace root)",
        )
    programs: list[tuple[Segment, ...]] = []
    for alternative in expand_braces(pattern):
        segs: list[Segment] = []
        for part in alternative.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                raise Refused(
                    RefusalCode.INVALID_ARGUMENT,
                    "pattern contains '..'",
                    "patterns cannot leave the search directory",
                )
            if part == STAR:
                if not segs or segs[-1] != STAR:
                    segs.append(STAR)
            elif any(ch in part for ch in "*?["):
                segs.append(re.compile(segment_regex(part), re.DOTALL))
            else:
                segs.append(part)
        if segs:
            programs.append(tuple(segs))
    if not programs:
        raise Refused(
            RefusalCode.INVALID_ARGUMENT, "pattern matches nothing", "give a pattern like '**/*.py'"
        )
    return programs


State = frozenset[tuple[int, int]]  # (program, position)


def seg_match(seg: Segment, name: str) -> bool:
    if isinstance(seg, str):
        return seg == name
    return seg.fullmatch(name) is not None


Pick = Callable[[list[str]], list[str]]


def literal_suffix(regex: str) -> str | None:
    """``S`` when ``regex`` is segment_regex('*' + S) for a wildcard-free S."""
    if not regex.startswith("[^/]*"):
        return None
    rest = regex[5:]
    text = re.sub(r"\\(.)", r"\1", rest, flags=re.DOTALL)
    return text if re.escape(text) == rest else None


class Matcher:
    def __init__(self, programs: list[tuple[Segment, ...]]) -> None:
        self.programs = programs
        self.finals: dict[State, re.Pattern[str]] = {}
        self.root: State = self.closure({(p, 0) for p in range(len(programs))})
        self.states: dict[tuple[str, ...], State] = {(): self.root}
        # Per directory state: its subdirectories' state when it does not depend on
        # the name (as for '**/...'), and the filter for its file names.
        self.constant_steps: dict[State, State | None] = {}
        self.picks: dict[State, Pick] = {}

    def closure(self, states: set[tuple[int, int]]) -> State:
        todo = list(states)
        while todo:
            p, i = todo.pop()
            prog = self.programs[p]
            if i < len(prog) and prog[i] == STAR and (p, i + 1) not in states:
                states.add((p, i + 1))
                todo.append((p, i + 1))
        return frozenset(states)

    def step(self, state: State, name: str) -> State:
        nxt: set[tuple[int, int]] = set()
        for p, i in state:
            prog = self.programs[p]
            if i >= len(prog):
                continue
            if prog[i] == STAR:
                nxt.add((p, i))
            elif seg_match(prog[i], name):
                nxt.add((p, i + 1))
        return self.closure(nxt)

    def state_for(self, parts: tuple[str, ...]) -> State:
        cached = self.states.get(parts)
        if cached is None:
            cached = self.step(self.state_for(parts[:-1]), parts[-1])
            self.states[parts] = cached
        return cached

    def prune(self, parts: tuple[str, ...]) -> bool:
        """True when no file in or below this directory can match."""
        return not any(i < len(self.programs[p]) for p, i in self.state_for(parts))

    def step_dir(self, state: State, name: str) -> State | None:
        """The state of subdirectory ``name``, or None when nothing below it can match.

        Positions past a program's end are dropped: no file or directory can
        continue from them, so they never change a match or a pruning decision.
        """
        constant = self.constant_steps.get(state, state)
        if constant is not state:
            return constant
        nxt: set[tuple[int, int]] = set()
        depends = False
        for p, i in state:
            prog = self.programs[p]
            if i >= len(prog):
                continue
            if prog[i] == STAR:
                nxt.add((p, i))
            elif i + 1 < len(prog):
                depends = True
                if seg_match(prog[i], name):
                    nxt.add((p, i + 1))
        result = self.closure(nxt) if nxt else None
        if result is not None and not any(i < len(self.programs[p]) for p, i in result):
            result = None
        if not depends:
            self.constant_steps[state] = result
        return result

    def pick(self, state: State) -> Pick:
        """A function keeping the file names that match in ``state``."""
        cached = self.picks.get(state)
        if cached is not None:
            return cached
        options: list[str | None] = []
        for p, i in state:
            prog = self.programs[p]
            if i != len(prog) - 1:
                continue
            seg = prog[i]
            if seg == STAR:
                options.append("")
            elif isinstance(seg, str):
                options.append(None)
            else:
                options.append(literal_suffix(seg.pattern))
        if options and None not in options:
            suffixes = tuple(sorted({o for o in options if o is not None}))
            if "" in suffixes:
                cached = list
            else:

                def cached(names: list[str], ends: tuple[str, ...] = suffixes) -> list[str]:
                    return [n for n in names if n.endswith(ends)]

        else:
            wanted = self.final(state).fullmatch

            def cached(names: list[str]) -> list[str]:
                return list(filter(wanted, names))

        self.picks[state] = cached
        return cached

    def file_matches(self, state: State, name: str) -> bool:
        return self.final(state).fullmatch(name) is not None

    def final(self, state: State) -> re.Pattern[str]:
        """One compiled pattern for every name a file in this state may have."""
        cached = self.finals.get(state)
        if cached is None:
            options: list[str] = []
            for p, i in state:
                prog = self.programs[p]
                if i != len(prog) - 1:
                    continue
                seg = prog[i]
                if seg == STAR:
                    options.append(".*")
                elif isinstance(seg, str):
                    options.append(re.escape(seg))
                else:
                    options.append(seg.pattern)
            body = "|".join(f"(?:{o})" for o in sorted(set(options))) or "(?!)"
            cached = self.finals[state] = re.compile(body, re.DOTALL)
        return cached

    def literal_names(self) -> frozenset[str]:
        return frozenset(
            s for prog in self.programs for s in prog if isinstance(s, str) and s != STAR
        )


def _matching_files(walker: Walker, pick: Callable[[State], Pick]) -> tuple[list[int], list[str]]:
    """The st_mtime_ns and path of every matching file walked (one gone meanwhile
    is left out), in walk order."""
    lib = native.NATIVE
    if lib is not None:
        return _native_files(lib, walker, pick)
    mtimes: list[int] = []
    paths: list[str] = []
    for fd, _, prefix, files, state in walker.directories():
        for name in pick(state)(files):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            mtimes.append(st.st_mtime_ns)
            paths.append(prefix + name)
    return mtimes, paths


def newest_first(mtimes: list[int], paths: list[str]) -> list[str]:
    """Paths by mtime, newest first, ties by path."""
    lib = native.NATIVE
    if lib is not None:
        result: list[str] = lib.newest_first(mtimes, paths)
        return result
    return [path for _, path in sorted(zip([-m for m in mtimes], paths, strict=True))]


# Names per tools._native.Stats: its thread stats one batch while the walk goes on.
# At most STAT_DIRS directories a batch: each holds a duplicated fd until the batch
# is done, and two batches are open at a time.
STAT_BATCH = 2048
STAT_DIRS = 128


class _StatBatch(HeldDirectories):
    """Directories whose matching names wait to be stat'ed, and those names' paths."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def add(self, fd: int, prefix: str, names: list[str]) -> None:
        self.hold(fd, names)
        self.paths.extend([prefix + name for name in names])


def _native_files(
    lib: Any, walker: Walker, pick: Callable[[State], Pick]
) -> tuple[list[int], list[str]]:
    """The same, stat'ed on a background thread a batch behind the walk."""
    mtimes: list[int] = []
    paths: list[str] = []
    batch, running = _StatBatch(), None

    def collect(job: Any, done: _StatBatch) -> None:
        try:
            times = job.wait()
        finally:
            done.close()
        if None in times:  # gone since the walk listed them
            kept = [(t, p) for t, p in zip(times, done.paths, strict=True) if t is not None]
            times, done.paths = [t for t, _ in kept], [p for _, p in kept]
        mtimes.extend(times)
        paths.extend(done.paths)

    try:
        for fd, _, prefix, files, state in walker.directories():
            names = pick(state)(files)
            if names:
                batch.add(fd, prefix, names)
            if batch.count >= STAT_BATCH or len(batch.pairs) >= STAT_DIRS:
                previous, running = running, (lib.Stats(batch.pairs), batch)
                batch = _StatBatch()  # (the new job is tracked before anything can raise)
                if previous is not None:
                    collect(*previous)
        if running is not None:
            collect(*running)
            running = None
        if batch.count:
            collect(lib.Stats(batch.pairs), batch)
    finally:
        if running is not None:  # an error on the way: the thread still uses the fds
            running[0].wait()
            running[1].close()
        batch.close()
    return mtimes, paths


def glob(ctx: ToolContext, raw_args: dict[str, Any]) -> ToolResult:
    args = GlobArgs.from_dict(raw_args)
    ws = ctx.workspace
    start = ws.parse(args.path)
    matcher = Matcher(compile_pattern(args.pattern))
    ws.authorize(start, Access.READ, ctx.authorize_path)
    budget = Budget(ctx.limits)
    walker = Walker(
        ctx,
        start,
        budget,
        allow_names=matcher.literal_names(),
        step=matcher.step_dir,
        root_state=matcher.root,
        sort_files=False,
    )
    mtimes, found = _matching_files(walker, matcher.pick)
    walker.report.annotate(budget)
    total = len(found)
    shown = newest_first(mtimes, found)[: ctx.limits.max_results]
    paths = shown
    if not budget.take_output(sum(map(len, paths)) + len(paths)):
        paths = []  # the output limit falls inside: take what fits, in order
        for path in shown:
            if not budget.take_output(len(path) + 1):
                break
            paths.append(path)
    if len(paths) < total:
        budget.incomplete(f"{total - len(paths)} more match(es) not shown; narrow the pattern")
    return ToolResult.success(
        NAME,
        {
            "pattern": args.pattern,
            "path": start.text,
            "files": paths,
            "total_matches": total,
            "coverage": budget.coverage(),
            **walker.report.to_dict(),
        },
    )


def format_text(data: dict[str, Any]) -> str:
    lines = list(data["files"]) or [f"(no files match {data['pattern']!r})"]
    cov = data["coverage"]
    if not cov["complete"]:
        lines.append("coverage: PARTIAL; " + "; ".join(cov["reasons"]))
    if data.get("skipped_directory_count"):
        lines.append(
            f"skipped {data['skipped_directory_count']} excluded director(ies): "
            + ", ".join(data["skipped_directories"][:10])
        )
    return "\n".join(lines)


register_formatter(NAME, format_text)
TOOL = ToolDef(
    NAME,
    DESCRIPTION,
    PARAMETERS,
    read_only=True,
    replay_safe=True,
    run=offloaded(NAME, glob),
    run_sync=glob,
)
