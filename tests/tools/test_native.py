"""tools._native against the pure-Python path it stands in for, and its own edges.

The differential tests build varied trees (CRLF, long lines, binary and empty
files, no final newline, invalid UTF-8) and require both paths to give the very
same search and glob results; the rest call the module directly for what only
it does (thread reads under the budget, special files, bad arguments).
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys

import pytest

from tools import Limits, ToolContext, Workspace, native, run_tool_sync
from tools.scan import ContentMatcher

from .conftest import REQUIRED, WHY_NOT_NATIVE, require_native

if native.NATIVE is None and not REQUIRED:
    pytest.skip(WHY_NOT_NATIVE, allow_module_level=True)

PATTERNS: list[tuple[str, bool]] = [
    ("needle", True),
    ("a\nb", True),
    ("Error", True),
    (r"\w+Error\b", False),
    (r"^$", False),
    (r"$", False),
    (r"[A-Za-z]{12}", False),
    (r"(?i)NEEDLE", False),
    (r"def \w+\(self", False),
    (r"x\s+y", False),
    (r"\r", False),
]
WORDS = ["needle", "ValueError", "KeyError", "def run(self", "x  y", "plain", "é", "hay"]


def random_tree(root: pathlib.Path, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(60):
        folder = root / f"d{i % 5}" / f"e{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [
            " ".join(rng.choices(WORDS, k=rng.randint(0, 6))) for _ in range(rng.randint(0, 40))
        ]
        if rng.random() < 0.1:
            lines.append("needle " + "z" * 9000)  # a long line
        newline = "\r\n" if rng.random() < 0.2 else "\n"
        text = newline.join(lines) + (newline if rng.random() < 0.7 else "")
        data = text.encode()
        if rng.random() < 0.08:
            data = b"needle\x00" + data  # binary
        if rng.random() < 0.08:
            data += b"needle \xff\xfe broken\n"  # invalid UTF-8
        (folder / f"f{i}.{rng.choice(['py', 'txt', 'ts'])}").write_bytes(data)
    (root / "empty.txt").write_bytes(b"")


def both(root: pathlib.Path, name: str, args: dict[str, object], limits: Limits) -> list[object]:
    results = []
    saved = native.NATIVE
    try:
        for lib in (saved, None):
            native.NATIVE = lib
            with Workspace.open(root) as ws:
                results.append(run_tool_sync(name, args, ToolContext(ws, limits)).to_dict())
    finally:
        native.NATIVE = saved
    return results


@pytest.fixture(autouse=True)
def hot_path() -> str:
    """Overrides the conftest's two-way parametrization: these tests hold both paths."""
    require_native()
    return "native"


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("engine", ["system-re2", "google-re2"])
def test_search_matches_python_path(
    tmp_path: pathlib.Path, seed: int, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the native RE2 (lines checked on the reader threads) and without it
    (as where the system's RE2 refuses a pattern: google-re2 called from C)."""
    if engine == "google-re2":
        monkeypatch.setattr(ContentMatcher, "native_regex", lambda self, lib: None)
    random_tree(tmp_path, seed)
    for pattern, literal in PATTERNS:
        for extra in ({}, {"max_results": 7}, {"include": "*.py"}, {"context": 1}):
            args = {"pattern": pattern, "literal": literal, **extra}
            fast, slow = both(tmp_path, "search_files", args, Limits())
            assert fast == slow, args


def test_search_bounds_match_python_path(tmp_path: pathlib.Path) -> None:
    random_tree(tmp_path, 4)
    for limits in (Limits(max_files=17), Limits(max_content_bytes=4000), Limits(max_entries=30)):
        fast, slow = both(tmp_path, "search_files", {"pattern": "needle"}, limits)
        assert fast == slow, limits
        assert not fast["data"]["coverage"]["complete"]
        assert fast["data"]["matches"], "what was read before the bound is still searched"


def test_single_file_search_matches_python_path(tmp_path: pathlib.Path) -> None:
    """A search whose path is one file goes through a one-file Reader."""
    random_tree(tmp_path, 7)
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    for path in files[::4]:
        for pattern, literal in PATTERNS[:6]:
            args = {"pattern": pattern, "literal": literal, "path": path}
            fast, slow = both(tmp_path, "search_files", args, Limits())
            assert fast == slow, (path, pattern)
    for limits in (Limits(max_content_bytes=10), Limits(max_files=0)):
        fast, slow = both(tmp_path, "search_files", {"pattern": "needle", "path": files[0]}, limits)
        assert fast == slow, limits


def test_glob_matches_python_path(tmp_path: pathlib.Path) -> None:
    random_tree(tmp_path, 5)
    os.symlink("d0", tmp_path / "link")
    for pattern in ("**/*.py", "d1/**", "*/e2/*.{ts,txt}", "**/f1?.*"):
        fast, slow = both(tmp_path, "glob", {"pattern": pattern}, Limits())
        assert fast == slow, pattern


def read(
    lib: object,
    groups: list[tuple[int, list[str]]],
    literal: bytes | None,
    rooms: tuple[int, int],
    lines: bool = True,
) -> tuple[object, ...]:
    budget = lib.Budget(*rooms)  # type: ignore[attr-defined]
    reader = lib.Reader(groups, literal, None, budget, lines, literal is not None, 8192)  # type: ignore[attr-defined]
    return reader, reader.wait()


def _read_bytes() -> int:
    """Bytes this process has read so far (/proc/self/io rchar)."""
    for line in pathlib.Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs /proc/self/io (Linux)")
def test_a_binary_file_is_read_no_further_than_its_probe(tmp_path: pathlib.Path) -> None:
    """Issue 28: a NUL in the first 8 KiB makes the file binary, and (as rg does) the
    reader stops there instead of reading the rest of a 12 MB file."""
    require_native()
    with open(tmp_path / "big.bin", "wb") as f:
        f.write(b"\x00" + b"needle\n" * (12 * 2**20 // 7))
    (tmp_path / "small.txt").write_bytes(b"needle\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        before = _read_bytes()
        reader, tallies = read(
            native.NATIVE, [(fd, ["big.bin", "small.txt"])], b"needle", (10, 1 << 26)
        )
        spent = _read_bytes() - before
    finally:
        os.close(fd)
    assert tallies[4] == 1 and reader.kept() == [(0, "small.txt")]
    assert spent < 1 << 20, f"read {spent:,} bytes for a binary file's 8 KiB probe"


LITERALS = [b"x", b"ab", b"ba", b"connection", b"Error", b"aaaab", b"xyzxyzxyzxyzxyzxyzq", b"e\ne"]


def test_literal_found_at_every_offset(tmp_path: pathlib.Path) -> None:
    """The literal finder compares 16 starts a step and finishes the tail byte by
    byte: a literal at every offset of files around those sizes is found, and near
    misses (all but its last byte, over and over) are not."""
    require_native()
    lib = native.NATIVE
    for literal in LITERALS:
        miss = (literal[:-1] + b"_") * 7
        folder = tmp_path / literal.hex()
        folder.mkdir()
        expected = []
        for size in (len(literal), 15, 16, 17, 31, 32, 33, 40, 70):
            for at in range(size - len(literal) + 1):
                data = (miss * 9)[:at] + literal + (miss * 9)[: size - at - len(literal)]
                name = f"s{size:02d}_{at:02d}"
                (folder / name).write_bytes(data)
                expected.append(name)
            (folder / f"miss{size:02d}").write_bytes((miss * 9)[:size])
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            names = sorted(os.listdir(folder))
            reader, _ = read(lib, [(fd, names)], literal, (10**6, 1 << 26))
            kept = [name for _, name in reader.kept()]  # type: ignore[attr-defined]
        finally:
            os.close(fd)
        assert kept == sorted(expected), literal


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_a_file_longer_than_its_size_is_read_on() -> None:
    """/proc files say size 0 and hold more: the reader reads past the size fstat
    gave (a file that grew while read), so a line far from the start is found."""
    lib = native.NATIVE
    fd = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
    try:
        reader, tallies = read(lib, [(fd, ["status"])], b"PPid:", (10, 1 << 20))
        hits, matched, _, _ = reader.scan([""], None, None, None, 10)  # type: ignore[attr-defined]
    finally:
        os.close(fd)
    assert tallies[0] == 1 and matched == 1
    assert len(hits) == 1 and hits[0]["text"].startswith("PPid:") and hits[0]["line"] > 1


def test_reader_refuses_what_is_not_a_regular_file(tmp_path: pathlib.Path) -> None:
    (tmp_path / "ok.txt").write_bytes(b"needle\n")
    (tmp_path / "bin").write_bytes(b"needle\x00")
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/etc/passwd", tmp_path / "link")
    os.mkdir(tmp_path / "dir")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = ["ok.txt", "bin", "fifo", "link", "dir", "gone"]
        whole, _ = read(native.NATIVE, [(fd, list(names))], b"needle", (100, 1 << 20), False)
        reader, tallies = read(native.NATIVE, [(fd, names)], b"needle", (100, 1 << 20))
    finally:
        os.close(fd)
    searched, files, _, unreadable, binary, over, stopped = tallies
    assert whole.kept() == [(0, "ok.txt")] and whole.chunks() == [b"needle\n"]  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        reader.chunks()  # only the lines were kept: the native scan's
    assert reader.kept() == [(0, "ok.txt")]
    assert (searched, files, binary, over, stopped) == (2, 2, 1, 0, False)
    assert unreadable == 2  # the symlink (never followed) and the vanished name
    names.clear()  # the caller's lists may change: the reader keeps its own
    assert reader.kept() == [(0, "ok.txt")]
    with pytest.raises(ValueError):
        reader.scan([], None, None, None, 10)  # no prefix for the file's group
    hits, matched, long_lines, _ = reader.scan([""], None, None, None, 10)
    assert (hits, matched, long_lines) == ([{"path": "ok.txt", "line": 1, "text": "needle"}], 1, 0)


def test_reader_budget_in_walk_order(tmp_path: pathlib.Path) -> None:
    for i, size in enumerate([10, 50, 10, 10, 10]):
        (tmp_path / f"f{i}").write_bytes(b"n" * (size - 1) + b"\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = [f"f{i}" for i in range(5)]
        reader, tallies = read(native.NATIVE, [(fd, names)], None, (3, 40))
    finally:
        os.close(fd)
    _, files, size, _, _, over, stopped = tallies
    # f1 does not fit the 40 bytes and is skipped; the third file taken hits the file limit.
    assert [n for _, n in reader.kept()] == ["f0", "f2", "f3"]
    assert (files, size, over, stopped) == (3, 30, 1, True)


def test_reader_many_files_on_threads(tmp_path: pathlib.Path) -> None:
    """Enough files for the worker threads; results stay in the caller's order."""
    for i in range(300):
        (tmp_path / f"f{i:03}").write_bytes(b"row\n" * i + (b"needle\n" if i % 7 == 0 else b""))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = sorted(os.listdir(tmp_path))
        reader, tallies = read(
            native.NATIVE, [(fd, names[:150]), (fd, names[150:])], b"needle", (1 << 30, 1 << 30)
        )
    finally:
        os.close(fd)
    kept = [n for _, n in reader.kept()]
    assert kept == [f"f{i:03}" for i in range(0, 300, 7)]
    hits, *_ = reader.scan(["a/", "b/"], None, None, None, 1000)
    expected = [(f"{'a' if i < 150 else 'b'}/f{i:03}", i + 1) for i in range(0, 300, 7)]
    assert [(h["path"], h["line"]) for h in hits] == expected
    assert tallies[0] == 300


def test_bad_arguments_are_typed_errors(tmp_path: pathlib.Path) -> None:
    lib = native.NATIVE
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(ValueError):
            lib.Reader([(fd, ["a/b"])], None, None, lib.Budget(10, 10), True, True, 8192)
        with pytest.raises(ValueError):
            lib.Stats([(fd, ["a\x00b"])])
        with pytest.raises(TypeError):
            lib.Reader([(fd, "notalist")], None, None, lib.Budget(10, 10), True, True, 8192)
        with pytest.raises(TypeError):
            lib.Reader([(fd, [])], b"", None, lib.Budget(10, 10), True, True, 8192)
        with pytest.raises(TypeError):
            lib.Reader([(fd, [])], None, None, (10, 10), True, True, 8192)
        with pytest.raises(ValueError):
            lib.listdir(-1)
        with pytest.raises(OSError):
            lib.listdir(999_999)
        assert lib.Stats([(fd, ["missing"])]).wait() == [None]
    finally:
        os.close(fd)


def test_search_and_glob_within_a_low_descriptor_limit(tmp_path: pathlib.Path) -> None:
    """1,500 one-file directories under RLIMIT_NOFILE 640: the duplicated directory
    fds and the readers' file fds stay bounded, so nothing is left unread."""
    for i in range(1500):
        folder = tmp_path / f"d{i % 30:02}" / f"e{i:04}"
        folder.mkdir(parents=True)
        (folder / "f.py").write_text("needle\n")
    probe = (
        "import json, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (640, 640))\n"
        "from tools import Limits, ToolContext, Workspace, run_tool_sync\n"
        "with Workspace.open('.') as ws:\n"
        "    ctx = ToolContext(ws, Limits.unbounded())\n"
        "    s = run_tool_sync('search_files', {'pattern': 'needle', 'max_results': 10**6}, ctx)\n"
        "    g = run_tool_sync('glob', {'pattern': '**/*.py'}, ctx)\n"
        "print(json.dumps([len(s.data['matches']), s.data['coverage'], g.data['total_matches'],"
        " g.data['coverage']]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    found, search_coverage, files, glob_coverage = json.loads(out.stdout)
    assert (found, files) == (1500, 1500)
    assert search_coverage["complete"] and glob_coverage["complete"]


def test_newest_first_orders_as_python_sorts() -> None:
    from tools.glob import newest_first

    rng = random.Random(7)
    paths = [f"d{rng.randint(0, 9)}/{rng.choice('abcé')}{i}.py" for i in range(500)]
    mtimes = [rng.choice([10, 20, 30]) * 10**9 for _ in paths]  # many ties
    fast = newest_first(mtimes, paths)
    saved = native.NATIVE
    try:
        native.NATIVE = None
        slow = newest_first(mtimes, paths)
    finally:
        native.NATIVE = saved
    assert fast == slow
    assert native.NATIVE.newest_first([1, 2, 2, 1], ["d", "c", "b", "a"]) == ["b", "c", "a", "d"]


def test_a_failing_glob_batch_leaves_no_descriptor_open(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stat batch that fails while the next one runs: both are waited for and
    their duplicated fds closed before the error surfaces as INTERNAL."""
    for i in range(600):
        folder = tmp_path / f"d{i:03}"
        folder.mkdir()
        (folder / "f.py").write_text("x\n")
    real = native.NATIVE
    waits = []

    class Failing:
        def __init__(self, groups: list[tuple[int, list[str]]]) -> None:
            self.job = real.Stats(groups)

        def wait(self) -> list[int | None]:
            waits.append(1)
            times = self.job.wait()
            if len(waits) == 2:
                raise RuntimeError("stat batch failed")
            return times

    class Lib:
        def __getattr__(self, name: str) -> object:
            return Failing if name == "Stats" else getattr(real, name)

    monkeypatch.setattr(native, "NATIVE", Lib())
    fds = len(os.listdir("/proc/self/fd"))
    with Workspace.open(tmp_path) as ws:
        result = run_tool_sync("glob", {"pattern": "**/*.py"}, ToolContext(ws, Limits.unbounded()))
    assert result.refusal is not None and result.refusal.code == "INTERNAL"
    assert len(os.listdir("/proc/self/fd")) == fds


def test_readers_take_the_shared_budget_in_turn(tmp_path: pathlib.Path) -> None:
    """Three readers of one search running at once: the budget falls where one
    reader in walk order would put it, whatever order their threads finish in."""
    lib = native.NATIVE
    for i in range(90):
        (tmp_path / f"f{i:02}").write_bytes(b"x" * (i % 7 + 1) * 100 + b"\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = sorted(os.listdir(tmp_path))
        for rooms in ((50, 1 << 30), (1 << 30, 12_000), (40, 9_000)):
            budget = lib.Budget(*rooms)
            readers = [
                lib.Reader([(fd, names[k : k + 30])], None, None, budget, True, True, 8192)
                for k in (0, 30, 60)
            ]
            taken = sorted(n for r in reversed(readers) for _, n in r.kept())  # last joined first
            single = lib.Reader([(fd, names)], None, None, lib.Budget(*rooms), True, True, 8192)
            assert taken == sorted(n for _, n in single.kept()), rooms
            assert sum(r.wait()[1] for r in readers) == single.wait()[1]
    finally:
        os.close(fd)


# -- error paths (nox -s sanitize runs these under ASan and UBSan) -----------------------


class Boom(Exception):
    pass


def raising_find(*args: object) -> object:
    raise Boom("find failed")


def test_a_raising_find_surfaces_its_own_error(tmp_path: pathlib.Path) -> None:
    """Reader.scan without a literal calls RE2's Match through Python on a view of
    its buffer; the view is released after the error, which stays the one raised
    (it used to become SystemError: release was called with the error pending)."""
    lib = native.NATIVE
    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        reader = lib.Reader(
            [(fd, ["a.txt"])], None, None, lib.Budget(10, 1 << 20), True, False, 8192
        )
        assert reader.wait()[0] == 1
        with pytest.raises(Boom):
            reader.scan([""], raising_find, None, None, 10)
    finally:
        os.close(fd)


def fail_alloc() -> object:
    fail = getattr(native.NATIVE, "_fail_alloc", None)
    if fail is None:
        pytest.skip("allocation faults are compiled only into the sanitize build (nox -s sanitize)")
    return fail


def each_allocation_failing(fail: object, work: object) -> int:
    """Run ``work`` with its 1st, 2nd, ... allocation failing, until it gets through
    with none failing; each run either raises MemoryError or gives a result (a read
    whose buffer failed counts the file unreadable). Returns how many failed."""
    failures = 0
    for n in range(1, 200):
        fail(n)  # type: ignore[operator]
        try:
            work()  # type: ignore[operator]
        except MemoryError:
            failures += 1
        if fail(0) != 0:  # type: ignore[operator]  # the n-th allocation never came
            return failures
    raise AssertionError("more than 200 allocations")


def test_allocation_failures_are_memory_errors(tmp_path: pathlib.Path) -> None:
    fail, lib = fail_alloc(), native.NATIVE
    for i in range(12):
        (tmp_path / f"f{i}.txt").write_bytes(b"needle here\nplain\n" * (i + 1))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    names = sorted(os.listdir(tmp_path))
    regex = lib.Regex(b"ne+dle", False)
    try:

        def stats() -> None:
            assert len(lib.Stats([(fd, names[:6]), (fd, names[6:])]).wait()) == 12

        def reader() -> None:
            for literal, pattern in ((b"needle", None), (None, regex)):
                r = lib.Reader(
                    [(fd, names)], literal, pattern, lib.Budget(99, 1 << 20), True, True, 8192
                )
                r.wait()
                r.scan([""], None, None, None, 100)

        def listing() -> None:
            lib.listdir(fd)
            sub, _ = lib.open_listdir(fd, ".")
            os.close(sub)

        for work in (stats, reader, listing):
            assert each_allocation_failing(fail, work) >= 1, work.__name__
    finally:
        os.close(fd)


def test_arenas_are_kept_only_while_a_search_runs(tmp_path: pathlib.Path) -> None:
    """A Reader's arena goes back to a cache for the search's next Reader; when the
    search's Budget goes, the cache is emptied (a TUI holds no arena between
    searches). Counted only in the sanitize build."""
    fail_alloc()
    lib = native.NATIVE
    (tmp_path / "a.txt").write_bytes(b"needle\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        budget = lib.Budget(10, 1 << 20)
        reader = lib.Reader([(fd, ["a.txt"])], b"needle", None, budget, True, True, 8192)
        assert reader.wait()[0] == 1
        del reader
        assert lib._cached_arenas() == 1  # kept for the search's next group
        del budget
        assert lib._cached_arenas() == 0
    finally:
        os.close(fd)
