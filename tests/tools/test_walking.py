"""list_directory, glob and search_files: ordering, pruning, filters and coverage."""

from __future__ import annotations

import os
import pathlib

import pytest

from tools import Limits

from .conftest import code


def touch(root: pathlib.Path, rel: str, text: str = "", mtime: int | None = None) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


async def test_list_marks_excluded_and_ignored(call, root):
    touch(root, "src/a.py", "x")
    touch(root, "node_modules/m/index.js")
    touch(root, ".git/HEAD")
    touch(root, "build/out.o")
    touch(root, "notes.log")
    touch(root, ".gitignore", "build/\n*.log\n")
    result = await call("list_directory")
    entries = {e["name"]: e for e in result.data["entries"]}
    assert entries["node_modules"]["excluded"] and entries[".git"]["excluded"]
    assert entries["build"]["excluded"] and entries["notes.log"]["excluded"]
    assert "excluded" not in entries["src"] and entries["src"]["type"] == "dir"
    assert entries[".gitignore"]["size"] == len("build/\n*.log\n")
    assert [e["type"] for e in result.data["entries"]][:4] == ["dir"] * 4
    assert result.data["coverage"] == {"complete": True, "reasons": []}
    assert "(excluded)" in result.model_text() or "excluded" in result.model_text()


async def test_list_bounded_by_entries(call, root):
    for i in range(30):
        touch(root, f"f{i:02}.txt")
    result = await call("list_directory", limits=Limits(max_entries=10))
    assert len(result.data["entries"]) == 10
    assert not result.data["coverage"]["complete"]
    assert code(await call("list_directory", path="f00.txt")) == "INVALID_ARGUMENT"
    assert code(await call("list_directory", path="nope")) == "NOT_FOUND"


async def test_glob_semantics_and_newest_first(call, root):
    touch(root, "a.py", mtime=1000)
    touch(root, "src/b.py", mtime=3000)
    touch(root, "src/deep/c.py", mtime=2000)
    touch(root, "src/deep/c.txt", mtime=4000)
    all_py = await call("glob", pattern="**/*.py")
    assert all_py.data["files"] == ["src/b.py", "src/deep/c.py", "a.py"]
    top = await call("glob", pattern="*.py")
    assert top.data["files"] == ["a.py"]
    one_level = await call("glob", pattern="src/*.py")
    assert one_level.data["files"] == ["src/b.py"]
    braces = await call("glob", pattern="src/**/*.{py,txt}")
    assert braces.data["files"] == ["src/deep/c.txt", "src/b.py", "src/deep/c.py"]
    under = await call("glob", pattern="*.py", path="src/deep")
    assert under.data["files"] == ["src/deep/c.py"]
    cls = await call("glob", pattern="src/deep/c.[pt]?")
    assert cls.data["files"] == ["src/deep/c.py"]


async def test_glob_prunes_before_opening(call, root, monkeypatch):
    import tools.walk as walk

    touch(root, "src/app/x.py")
    touch(root, "docs/guide/x.md")
    touch(root, "other/deep/deeper/x.py")
    opened: list[str] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        opened.append(path if isinstance(path, str) else repr(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(walk.os, "open", spy)
    result = await call("glob", pattern="src/**/*.py")
    assert result.data["files"] == ["src/app/x.py"]
    assert "docs" not in opened and "other" not in opened and "guide" not in opened


async def test_glob_skips_excluded_unless_named(call, root):
    touch(root, "node_modules/pkg/index.js")
    touch(root, "lib/index.js")
    touch(root, "gen/out.js")
    touch(root, ".gitignore", "gen/\n")
    result = await call("glob", pattern="**/*.js")
    assert result.data["files"] == ["lib/index.js"]
    assert sorted(result.data["skipped_directories"]) == ["gen", "node_modules"]
    assert result.data["coverage"]["complete"]
    named = await call("glob", pattern="node_modules/**/*.js")
    assert named.data["files"] == ["node_modules/pkg/index.js"]


async def test_glob_results_bounded(call, root):
    for i in range(20):
        touch(root, f"f{i}.txt")
    result = await call("glob", pattern="*.txt", limits=Limits(max_results=5))
    assert len(result.data["files"]) == 5 and result.data["total_matches"] == 20
    assert not result.data["coverage"]["complete"]


async def test_glob_bad_patterns(call):
    for pattern in ("", "/etc/*", "../*", "a\\b"):
        assert code(await call("glob", pattern=pattern)) == "INVALID_ARGUMENT", pattern


async def test_search_regex_context_and_format(call, root):
    touch(root, "a.py", "one\ntwo\nraise ValueError('x')\nthree\nfour\n")
    touch(root, "b.txt", "KeyError here\n")
    result = await call("search_files", pattern=r"\w+Error\b", context=1)
    matches = result.data["matches"]
    assert [(m["path"], m["line"]) for m in matches] == [("a.py", 3), ("b.txt", 1)]
    assert matches[0]["before"] == [[2, "two"]] and matches[0]["after"] == [[4, "three"]]
    text = result.model_text()
    assert "a.py-2-two" in text and "a.py:3:raise ValueError('x')" in text
    assert result.data["coverage"]["complete"]


async def test_search_literal_include_and_single_file(call, root):
    touch(root, "src/a.py", "x = a.b(c)\n")
    touch(root, "src/a.js", "x = a.b(c)\n")
    touch(root, "test/t.py", "a.b(c)\n")
    literal = await call("search_files", pattern="a.b(c)", literal=True, include="*.py")
    assert sorted(m["path"] for m in literal.data["matches"]) == ["src/a.py", "test/t.py"]
    scoped = await call("search_files", pattern="a.b(c)", literal=True, include="src/*.py")
    assert [m["path"] for m in scoped.data["matches"]] == ["src/a.py"]
    one = await call("search_files", pattern=r"a\.b", path="src/a.js")
    assert [m["path"] for m in one.data["matches"]] == ["src/a.js"]
    regex_not_literal = await call("search_files", pattern="a.b(c)")
    assert regex_not_literal.data["matches"] == []


async def test_search_max_results_and_coverage(call, root):
    for i in range(10):
        touch(root, f"d{i}/f.txt", "hit\n" * 5)
    result = await call("search_files", pattern="hit", max_results=7)
    assert len(result.data["matches"]) == 7
    assert not result.data["coverage"]["complete"]
    assert any("max_results" in r for r in result.data["coverage"]["reasons"])
    empty_partial = await call("search_files", pattern="absent", limits=Limits(max_files=3))
    assert empty_partial.data["matches"] == []
    assert not empty_partial.data["coverage"]["complete"]
    assert "PARTIAL" in empty_partial.model_text()


async def test_search_output_budget(call, root):
    touch(root, "f.txt", ("y" * 200 + "\n") * 200)
    result = await call(
        "search_files", pattern="y", max_results=1000, limits=Limits(max_output_bytes=2000)
    )
    assert 0 < len(result.data["matches"]) < 20
    assert any("output limit" in r for r in result.data["coverage"]["reasons"])


async def test_search_skips_binary_and_excluded(call, root):
    (root / "img.bin").write_bytes(b"\x00\x01needle")
    touch(root, "node_modules/x.js", "needle\n")
    touch(root, "ok.txt", "needle\n")
    result = await call("search_files", pattern="needle")
    assert [m["path"] for m in result.data["matches"]] == ["ok.txt"]
    assert result.data["skipped"]["binary_files"] == 1
    assert result.data["skipped_directories"] == ["node_modules"]
    inside = await call("search_files", pattern="needle", path="node_modules")
    assert [m["path"] for m in inside.data["matches"]] == ["node_modules/x.js"]


async def test_search_anchors_are_per_line(call, root):
    touch(root, "f.py", "x = 1\ndef go():\n    def inner(): pass\n")
    result = await call("search_files", pattern=r"^def \w+")
    assert [m["line"] for m in result.data["matches"]] == [2]
    tail = await call("search_files", pattern=r"pass$")
    assert [m["line"] for m in tail.data["matches"]] == [3]
    crossing = await call("search_files", pattern=r"1\s+def")
    assert crossing.data["matches"] == []


async def test_search_invalid_regex(call):
    result = await call("search_files", pattern="(unclosed")
    assert code(result) == "INVALID_ARGUMENT" and "literal" in result.refusal.hint


def test_required_literal_extraction():
    from tools.regex import required_literal

    cases = {
        r"\w+Error\b": b"Error",
        "[A-Za-z]{30}": None,
        "foo|bar": None,
        "(?i)hello": None,
        r"foo\.bar": b"foo.bar",
        "colou?r": b"colo",
        r"def \w+\(self": b"(self",
        "ab{0,3}c": None,
    }
    for pattern, literal in cases.items():
        assert required_literal(pattern, literal=False) == literal, pattern
    assert required_literal("a|b", literal=True) == b"a|b"


async def test_search_batches_keep_files_apart(call, root):
    """Many files share one scan buffer; lines, numbers and context stay per file."""
    touch(root, "a.txt", "x\n\nend")  # no final newline
    touch(root, "b.txt", "\nfirst\n")
    (root / "c.bin").write_bytes(b"\x00end\n")
    touch(root, "d.txt", "end\n")
    empty = await call("search_files", pattern="^$")
    assert [(m["path"], m["line"]) for m in empty.data["matches"]] == [("a.txt", 2), ("b.txt", 1)]
    ends = await call("search_files", pattern="end$", context=2)
    rows = [(m["path"], m["line"], m.get("before"), m.get("after")) for m in ends.data["matches"]]
    assert rows == [("a.txt", 3, [[1, "x"], [2, ""]], []), ("d.txt", 1, None, None)]
    assert ends.data["skipped"]["binary_files"] == 1
    starts = await call("search_files", pattern="^first", context=3)
    match = starts.data["matches"][0]
    assert (match["path"], match["line"], match["before"]) == ("b.txt", 2, [[1, ""]])
    assert match["after"] == []


async def test_search_many_files_line_numbers(call, root):
    for i in range(300):
        touch(root, f"f{i:03}.txt", "".join(f"row {j}\n" for j in range(50)) + f"hit {i}\n")
    result = await call("search_files", pattern=r"^hit \d+$", max_results=1000)
    assert len(result.data["matches"]) == 300
    assert all(m["line"] == 51 for m in result.data["matches"])
    assert [m["path"] for m in result.data["matches"]] == [f"f{i:03}.txt" for i in range(300)]
    assert result.data["files_searched"] == 300 and result.data["files_matched"] == 300


async def test_search_content_budget_skips_big_files_and_goes_on(call, root):
    touch(root, "a_big.txt", "needle\n" * 2000)
    touch(root, "b_small.txt", "needle\n")
    result = await call(
        "search_files", pattern="needle", max_results=5000, limits=Limits(max_content_bytes=1000)
    )
    assert [m["path"] for m in result.data["matches"]] == ["b_small.txt"]
    assert not result.data["coverage"]["complete"]
    assert any("content limit" in r for r in result.data["coverage"]["reasons"])


async def test_search_long_literal_paths(call, root):
    """Long required literals take the bytes.find path; results must not change."""
    touch(root, "a.py", "x\nlog('connection_pool_exhausted')\nconnection_pool_x\n")
    touch(root, "b.py", "connection_pool_exhausted connection_pool_exhausted\n")
    plain = await call("search_files", pattern="connection_pool_exhausted", literal=True)
    assert [(m["path"], m["line"]) for m in plain.data["matches"]] == [("a.py", 2), ("b.py", 1)]
    regex = await call("search_files", pattern=r"connection_pool_\w+d\b")
    assert [(m["path"], m["line"]) for m in regex.data["matches"]] == [("a.py", 2), ("b.py", 1)]
    short = await call("search_files", pattern=r"connection_pool_x$")
    assert [(m["path"], m["line"]) for m in short.data["matches"]] == [("a.py", 3)]


def test_glob_suffix_fast_path_agrees_with_the_pattern():
    from tools.glob import literal_suffix, segment_regex

    assert literal_suffix(segment_regex("*.py")) == ".py"
    assert literal_suffix(segment_regex("*")) == ""
    assert literal_suffix(segment_regex("*.tar.gz")) == ".tar.gz"
    assert literal_suffix(segment_regex("*[")) == "["
    for not_suffix in ("*.py*", "a*.py", "*.p?", "*.[ch]", "x"):
        assert literal_suffix(segment_regex(not_suffix)) is None, not_suffix


async def test_glob_mixed_alternatives_and_name_dependent_states(call, root):
    touch(root, ".hidden.py", mtime=1000)
    touch(root, "a.py", mtime=2000)
    touch(root, "a.pyc", mtime=3000)
    touch(root, "src/x/b.py", mtime=4000)
    touch(root, "src/x/b.txt", mtime=5000)
    touch(root, "src/y/c.md", mtime=6000)
    touch(root, "lib/x/d.py", mtime=7000)
    touch(root, "x.py/e.py", mtime=8000)  # a directory named like a match
    result = await call("glob", pattern="{**/*.py,src/*/b.t?t,src/y/c.md}")
    assert result.data["files"] == [
        "x.py/e.py",
        "lib/x/d.py",
        "src/y/c.md",
        "src/x/b.txt",
        "src/x/b.py",
        "a.py",
        ".hidden.py",
    ]
    nested = await call("glob", pattern="*/x/*")
    assert nested.data["files"] == ["lib/x/d.py", "src/x/b.txt", "src/x/b.py"]
    star = await call("glob", pattern="src/**")
    assert star.data["files"] == ["src/y/c.md", "src/x/b.txt", "src/x/b.py"]


def test_abandoned_walk_closes_its_descriptors(ctx, root):
    from tools.limits import Budget
    from tools.walk import Walker

    for i in range(3):
        touch(root, f"d{i}/e/f.txt")
    fds_before = len(os.listdir("/proc/self/fd"))
    for stop_after in range(1, 8):
        walk = Walker(ctx, ctx.workspace.parse("."), Budget(ctx.limits)).directories()
        for n, _ in enumerate(walk, 1):
            if n == stop_after:
                break
        walk.close()
    assert len(os.listdir("/proc/self/fd")) == fds_before


async def test_search_literal_probe_gives_way_on_dense_trees(call, root):
    """Per-file literal checks stop once most files hold the literal; results stay
    the same, in order, with line numbers and the output accounting intact."""
    from tools.search import PROBE_FILES

    count = PROBE_FILES + 60
    for i in range(count):
        body = "x\n" * (i % 7) + ("Error here\n" if i % 5 else "nothing\n") + "tail Error\n"
        touch(root, f"d{i // 100}/f{i:04}.txt", body)
    result = await call("search_files", pattern=r"\w*Error\b", max_results=10_000)
    rows = [(m["path"], m["line"]) for m in result.data["matches"]]
    expected = []
    for i in range(count):
        path = f"d{i // 100}/f{i:04}.txt"
        if i % 5:
            expected.append((path, i % 7 + 1))
        expected.append((path, i % 7 + 2))
    assert rows == expected
    assert result.data["files_matched"] == count and result.data["coverage"]["complete"]
    literal = await call("search_files", pattern="Error here", literal=True, max_results=10_000)
    assert len(literal.data["matches"]) == sum(1 for i in range(count) if i % 5)
    few = await call(
        "search_files", pattern="Error", max_results=10_000, limits=Limits(max_output_bytes=400)
    )
    assert 0 < len(few.data["matches"]) < 20
    assert any("output limit" in r for r in few.data["coverage"]["reasons"])


async def test_search_worker_errors_surface_and_the_thread_ends(call, root, monkeypatch, hot_path):
    """A failing scan is INTERNAL; the Python path's worker thread ends, and the
    native path's readers are waited for and their descriptors closed."""
    import threading

    import tools.search_native
    from tools.scan import ContentMatcher

    for i in range(600):  # more than one group of files on the native path
        touch(root, f"d{i % 3}/f{i}.txt", "abc\n")
    ok = await call("search_files", pattern="[a-c]{3}", max_results=1000)  # no literal
    assert len(ok.data["matches"]) == 600

    def broken(*args):
        raise RuntimeError("scan failed")

    if hot_path == "native":
        monkeypatch.setattr(tools.search_native, "scan", broken)
    else:
        monkeypatch.setattr(ContentMatcher, "search", broken)
    fds = len(os.listdir("/proc/self/fd"))
    result = await call("search_files", pattern="[a-c]{3}")
    assert code(result) == "INTERNAL"
    assert not [t for t in threading.enumerate() if t.name == "search"]
    assert len(os.listdir("/proc/self/fd")) == fds


async def test_a_file_growing_while_read_is_read_to_a_bound(call, root, monkeypatch, hot_path):
    """A file longer than fstat said (still being written, or a filesystem that
    never says EOF) is read at most 1 MiB past that size: the search ends."""
    if hot_path == "native":
        pytest.skip("fstat is the C library's there; the bound is the same GROWTH_READ")
    import stat as stat_module

    import tools.search

    (root / "log.txt").write_bytes(b"start\n" + b"x" * (3 << 20) + b"\nend\n")
    real_fstat = os.fstat

    def small(fd):
        st = real_fstat(fd)
        if not stat_module.S_ISREG(st.st_mode):
            return st
        return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))

    monkeypatch.setattr(tools.search.os, "fstat", small)
    found = await call("search_files", pattern="start|end")
    assert [m["text"] for m in found.data["matches"]] == ["start"]


def test_a_directory_files_are_ignored_as_each_file_alone_would_be():
    """unignored_files (one pass per directory) keeps exactly what is_ignored keeps file
    by file: nested frames, negation, anchored, directory-only and wildcard rules."""
    from tools.ignore import IgnoreFrame, is_ignored, parse_rules, unignored_files

    frames = [
        IgnoreFrame((), parse_rules("*.log\nbuild/\n/top.txt\n!keep.log\nsrc/*.tmp\n")),
        IgnoreFrame(("src",), parse_rules("gen_*\n!gen_keep.py\n*.log\n")),
        IgnoreFrame(("src", "deep"), parse_rules("only/\n")),
    ]
    names = ["a.py", "a.log", "keep.log", "top.txt", "x.tmp", "gen_a.py", "gen_keep.py", "only"]
    for parts in [(), ("src",), ("src", "deep"), ("other",), ("src", "deep", "more")]:
        expected = [n for n in names if not is_ignored(frames, (*parts, n), False)]
        assert unignored_files(frames, parts, names) == expected
    # Directory-only rules never filter files: the list comes back as it was.
    only_dirs = [IgnoreFrame((), parse_rules("build/\n"))]
    assert unignored_files(only_dirs, ("a",), names) is names
    assert unignored_files(frames, (), names) != names  # (and the others do filter)
