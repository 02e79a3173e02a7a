"""Benchmark the coding tools against ripgrep, grep, fd and find.

    python tests/bench/bench_tools.py [--dir DIR] [--runs N] [--only tree,stdlib]

Generates (once, cached in DIR; default $BASTION_BENCH_DIR or <repo>/bench-data)
a deterministic tree of >= 20,000 source-like files and >= 200 MB, then prints
whole-process wall-clock ratios (median of N runs; every command is a fresh
process). Like with like: the same tree, every tool's output written to a
regular file (GNU grep and ripgrep stop at the first match when writing to
/dev/null), and the tool's result bounds raised (``--limits unbounded`` and a
huge max_results) so it searches and reports the whole tree as rg does.

On a shared machine the medians drift by 10-25% from one run of this script to
the next (other processes come and go); to judge a change, run the old and new
code interleaved in one loop and compare minimum CPU times, not two bench runs
taken minutes apart.

A second tree (DIR-stdlib, issue 28): the CPython stdlib copied five times, 200
generated binary files and an ignored `build/` (in `.ignore` for rg and fd, which
read it without git, and in `.gitignore` for bastion); search vs `rg -n` and glob
vs `fd -g`, each printed for the native and the pure-Python path (target <= 1.5x),
with each command's CPU time (user + system, all its threads) beside its wall time:
under load the wall times stretch with the queue for the cores, the CPU times less.

Not collected by pytest: no test functions, and main() only runs as a script.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rows import record

REPO = Path(__file__).resolve().parents[2]
SPEC = "bench-tree-v2 seed=20261130 files=20480 dirs=2880 target=210MB"
FILES = 20_480
TARGET_BYTES = 210 * 1024 * 1024
LITERAL = "connection_pool_exhausted"
PATTERNS = [
    ("literal", LITERAL, True),
    ("word-error", r"\w+Error\b", False),
    ("letters30", "[A-Za-z]{30}", False),
]
GLOB = "**/*.py"

WORDS = [
    "request",
    "response",
    "handler",
    "config",
    "value",
    "index",
    "count",
    "result",
    "buffer",
    "stream",
    "token",
    "session",
    "client",
    "server",
    "cache",
    "entry",
    "record",
    "batch",
    "worker",
    "queue",
    "task",
    "event",
    "state",
    "parser",
    "reader",
    "writer",
    "module",
    "package",
    "schema",
    "field",
    "column",
    "table",
    "query",
    "filter",
    "update",
    "delete",
    "create",
    "load",
    "store",
    "fetch",
    "parse",
    "render",
    "format",
    "encode",
    "decode",
]
ERRORS = [
    "ValueError",
    "KeyError",
    "TypeError",
    "RuntimeError",
    "IOError",
    "TimeoutError",
    "ConnectionError",
    "ParseError",
    "ValidationError",
]


def ident(rng: random.Random) -> str:
    parts = rng.sample(WORDS, rng.choice((1, 1, 2, 2, 3)))
    return "_".join(parts)


def camel(rng: random.Random, n: int) -> str:
    return "".join(w.capitalize() for w in rng.sample(WORDS, n))


def python_line(rng: random.Random) -> str:
    kind = rng.random()
    a, b = ident(rng), ident(rng)
    if kind < 0.25:
        return f"        {a} = self.{b}({ident(rng)}, {rng.randint(0, 999)})"
    if kind < 0.40:
        return f"    def {a}(self, {b}: {camel(rng, 1)}) -> {camel(rng, 2)}:"
    if kind < 0.50:
        return f"        if {a} is None or {b} > {rng.randint(1, 64)}:"
    if kind < 0.515:
        return f'            raise {rng.choice(ERRORS)}(f"{a} failed for {{{b}}}")'
    if kind < 0.525:
        return f"        except {rng.choice(ERRORS)} as exc:"
    if kind < 0.70:
        return f"        # {' '.join(rng.choices(WORDS, k=rng.randint(4, 12)))}"
    if kind < 0.80:
        return f"        return {a}.{b}({ident(rng)})"
    if kind < 0.82:
        return f"class {camel(rng, rng.choice((2, 3, 4)))}({camel(rng, 1)}):"
    if kind < 0.8205:
        return f'        logger.error("{LITERAL}: %s", {a})'
    if kind < 0.8215:
        return f"    {camel(rng, 5)}{camel(rng, 2)} = {rng.randint(0, 9)}"
    if kind < 0.90:
        return ""
    return f"        for {a} in {b}:"


def js_line(rng: random.Random) -> str:
    kind = rng.random()
    a, b = ident(rng), ident(rng)
    if kind < 0.3:
        return f"  const {a} = await {b}.{ident(rng)}({rng.randint(0, 99)});"
    if kind < 0.32:
        return f"  if (!{a}) throw new {rng.choice(ERRORS)}('{b} missing');"[:200]
    if kind < 0.40:
        return f"export function {a}({b}) {{"
    if kind < 0.60:
        return f"  // {' '.join(rng.choices(WORDS, k=rng.randint(3, 10)))}"
    if kind < 0.601:
        return f"  log.warn('{LITERAL}', {a});"
    return "}" if kind < 0.75 else f"  return {a} ?? {b};"


def pool(rng: random.Random, maker, size: int) -> list[str]:
    return [maker(rng) for _ in range(size)]


def generate(root: Path) -> None:
    rng = random.Random(20261130)
    py_pool, js_pool = pool(rng, python_line, 40_000), pool(rng, js_line, 20_000)
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    per_file = TARGET_BYTES // FILES
    total = 0
    for i in range(FILES):
        pkg = f"pkg{i % 24:02d}"
        sub = f"{WORDS[(i // 24) % 40]}_{(i // 24) % 40:02d}"
        leaf = f"part{(i // 960) % 3}"
        ext, lines_pool = (".py", py_pool) if i % 3 else (".ts", js_pool)
        folder = tmp / pkg / "src" / sub / leaf
        folder.mkdir(parents=True, exist_ok=True)
        size = int(per_file * rng.uniform(0.3, 1.7))
        lines: list[str] = []
        length = 0
        while length < size:
            chunk = rng.choices(lines_pool, k=64)
            lines.extend(chunk)
            length += sum(len(x) + 1 for x in chunk)
        text = "\n".join(lines) + "\n"
        (folder / f"{ident(rng)}_{i}{ext}").write_text(text)
        total += len(text)
    (tmp / "SPEC").write_text(SPEC + "\n")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    print(f"generated {FILES} files, {total / 1e6:.0f} MB in {root}")


def ensure_tree(root: Path) -> None:
    spec = root / "SPEC"
    if spec.exists() and spec.read_text().strip() == SPEC:
        return
    print(f"generating the benchmark tree in {root} (once) ...", flush=True)
    generate(root)


def ensure_binaries() -> dict[str, str | None]:
    found = {"rg": shutil.which("rg"), "fd": shutil.which("fd") or shutil.which("fdfind")}
    if all(found.values()):
        return found
    print("rg/fd missing: trying `apt-get install -y ripgrep fd-find` ...", flush=True)
    try:
        subprocess.run(
            ["apt-get", "install", "-y", "ripgrep", "fd-find"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"could not install ripgrep/fd-find ({exc}); those comparisons are skipped")
    found = {"rg": shutil.which("rg"), "fd": shutil.which("fd") or shutil.which("fdfind")}
    return found


def timed(argv: list[str], cwd: Path, sink: Path) -> tuple[float, int, float]:
    """Wall time, output size and CPU time (user + system, all threads) of one run."""
    with open(sink, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed with {proc.returncode}")
    return elapsed, sink.stat().st_size, usage.ru_utime + usage.ru_stime


#: The median CPU time of each command the last `medians` call measured: on a loaded
#: machine wall times stretch with the queue for the cores, CPU times much less.
CPU: dict[str, float] = {}


def medians(commands: dict[str, list[str]], cwd: Path, runs: int, sink: Path) -> dict[str, float]:
    """Median wall time of each command, runs interleaved (a, b, c, a, b, c, ...) so
    that load from elsewhere on the machine falls on every command alike. A command
    slower than 5 s (grep on some regexes) is run once more and not repeated."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    slow = set()
    for name, argv in commands.items():  # warm the page cache and each binary
        if timed(argv, cwd, sink)[0] > 5.0:
            slow.add(name)
            wall, _, cpu = timed(argv, cwd, sink)
            times[name].append(wall)
            cpus[name].append(cpu)
    for _ in range(runs):
        for name, argv in commands.items():
            if name not in slow:
                wall, _, cpu = timed(argv, cwd, sink)
                times[name].append(wall)
                cpus[name].append(cpu)
    CPU.clear()
    CPU.update({name: statistics.median(values) for name, values in cpus.items()})
    return {name: statistics.median(values) for name, values in times.items()}


def counted(argv: list[str], cwd: Path, sink: Path, key: str | None) -> int:
    """Run once more to count what the command found (like for like)."""
    timed(argv, cwd, sink)
    return count_tool(sink, key) if key else count_lines(sink)


def count_tool(sink: Path, key: str) -> int:
    return len(json.loads(sink.read_text())["data"][key])


def count_lines(sink: Path) -> int:
    with open(sink, "rb") as fh:
        return sum(1 for _ in fh)


def shown(argv: list[str]) -> str:
    """A reference command as a table cell names it: `rg -n -F connection`."""
    return " ".join([Path(argv[0]).name, *argv[1:]])


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "MISSED"


def tool_argv(name: str, args: dict[str, object]) -> list[str]:
    return [sys.executable, "-m", "tools", "--limits", "unbounded", name, json.dumps(args)]


def compare(
    what: str,
    commands: dict[str, list[str]],
    key: str,
    target: tuple[str, float] | None,
    root: Path,
    runs: int,
    sink: Path,
) -> str:
    """One row: the tool's time, then each other command's time and the ratio; the
    ratio against the target's reference is recorded as `what`."""
    times = medians(commands, root, runs, sink)
    ours = times["tools"]
    found = counted(commands["tools"], root, sink, key)
    row = [f"tools {ours:.3f}s ({found} found)"]
    for name, argv in commands.items():
        if name == "tools":
            continue
        ratio = ours / times[name]
        theirs = counted(argv, root, sink, None)
        cell = f"{name} {times[name]:.3f}s x{ratio:.2f} ({theirs} found)"
        if target and target[0] == name:
            cell += f" [{verdict(ratio, target[1])} target <={target[1]:g}x]"
            record(
                f"{what}, generated tree (native path)",
                f"{ours * 1e3:.0f} ms ({found} found)",
                f"`{shown(argv)}` {times[name] * 1e3:.0f} ms ({theirs} found)",
                ratio,
                target[1],
            )
        row.append(cell)
    return " | ".join(row)


def bench_search(root: Path, bins: dict[str, str | None], runs: int, sink: Path) -> list[str]:
    rows = []
    for label, pattern, literal in PATTERNS:
        args = {"pattern": pattern, "literal": literal, "max_results": 10**9}
        commands = {"tools": tool_argv("search_files", args)}
        if bins["rg"]:
            commands["rg"] = [bins["rg"], "-n", "-F" if literal else "-e", pattern]
            if not literal:
                commands["rg"] = [bins["rg"], "-n", "-e", pattern]
        commands["grep"] = ["grep", "-rn", "-F" if literal else "-E", "-e", pattern, "."]
        row = compare(f"search {label}", commands, "matches", ("rg", 2.0), root, runs, sink)
        rows.append(f"search {label:<11} {row}")
    return rows


def bench_glob(root: Path, bins: dict[str, str | None], runs: int, sink: Path) -> list[str]:
    commands = {"tools": tool_argv("glob", {"pattern": GLOB})}
    if bins["fd"]:
        commands["fd"] = [bins["fd"], "-t", "f", "-g", "*.py"]
    commands["find"] = ["find", ".", "-type", "f", "-name", "*.py"]
    row = compare(f"glob {GLOB}", commands, "files", ("fd", 1.5), root, runs, sink)
    return [f"glob {GLOB:<14} {row}"]


# --- the CPython stdlib x5, with binaries and an ignored folder (issue 28) -------------

STDLIB_SPEC = "bench-stdlib-v1 copies=5 binaries=200x(64KB..2MB) seed=28 ignored=build/"
STDLIB_COPIES = 5
STDLIB_BINARIES = 200
STDLIB_PATTERNS = [("literal", "connection", True), ("word-error", r"\w+Error\b", False)]
#: One rule, in both files: rg and fd read `.ignore` without git, bastion reads `.gitignore`.
IGNORED = "build/\n"


def generate_stdlib(root: Path) -> None:
    """The stdlib (without site-packages and bytecode) copied STDLIB_COPIES times, then
    STDLIB_BINARIES binary files (an ELF-like header and a NUL in their first bytes, like
    a build's output) spread among them, and an ignored `build/` holding a sixth copy."""
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skip = shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc")
    tmp = root.with_name(root.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for n in range(STDLIB_COPIES):
        shutil.copytree(stdlib, tmp / f"copy{n}", ignore=skip, symlinks=True)
    shutil.copytree(stdlib, tmp / "build" / "lib", ignore=skip, symlinks=True)
    rng = random.Random(28)
    folders = sorted(p for p in tmp.glob("copy*/*") if p.is_dir())
    total = 0
    for i in range(STDLIB_BINARIES):
        size = rng.randint(64 * 1024, 2 * 1024 * 1024)
        blob = b"\x7fELF\x02\x01\x01\x00" + rng.randbytes(size - 8)
        (rng.choice(folders) / f"_generated_{i}.so").write_bytes(blob)
        total += size
    (tmp / ".ignore").write_text(IGNORED)
    (tmp / ".gitignore").write_text(IGNORED)
    (tmp / "SPEC").write_text(STDLIB_SPEC + "\n")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    print(f"generated the stdlib x{STDLIB_COPIES} tree with {total / 1e6:.0f} MB of binaries")


def ensure_stdlib_tree(root: Path) -> None:
    spec = root / "SPEC"
    if spec.exists() and spec.read_text().strip() == STDLIB_SPEC:
        return
    print(f"generating the stdlib tree in {root} (once) ...", flush=True)
    generate_stdlib(root)


def bench_stdlib(root: Path, bins: dict[str, str | None], runs: int, sink: Path) -> list[str]:
    """search vs `rg -n` and glob vs `fd -g`, each through the native path and the pure
    Python one (BASTION_NATIVE=0): targets <= 1.5x."""
    rows = []
    python_path = ["env", "BASTION_NATIVE=0"]
    for label, pattern, literal in STDLIB_PATTERNS:
        args = {"pattern": pattern, "literal": literal, "max_results": 10**9}
        commands = {"tools": tool_argv("search_files", args)}
        commands["python"] = python_path + tool_argv("search_files", args)
        if bins["rg"]:
            commands["rg"] = [bins["rg"], "-n", "-F" if literal else "-e", pattern]
        row = stdlib_row(f"search {label}", commands, "matches", "rg", root, runs, sink)
        rows.append(f"stdlib search {label:<11} " + row)
    commands = {"tools": tool_argv("glob", {"pattern": GLOB})}
    commands["python"] = python_path + tool_argv("glob", {"pattern": GLOB})
    if bins["fd"]:
        commands["fd"] = [bins["fd"], "-t", "f", "-g", GLOB]
    row = stdlib_row(f"glob {GLOB}", commands, "files", "fd", root, runs, sink)
    rows.append(f"stdlib glob {GLOB:<14} " + row)
    return rows


STDLIB_TARGET = 1.5


def stdlib_row(
    what: str,
    commands: dict[str, list[str]],
    key: str,
    ref: str,
    root: Path,
    runs: int,
    sink: Path,
) -> str:
    """The native and the Python path's times, each with its ratio against `ref`
    (each recorded as a row of its own)."""
    times = medians(commands, root, runs, sink)
    if ref not in times:
        return f"tools {times['tools']:.3f}s ({ref} missing: no ratio)"
    base, base_cpu = times[ref], CPU[ref]
    theirs = counted(commands[ref], root, sink, None)
    cells = [f"{ref} {base:.3f}s (cpu {base_cpu:.3f}s, {theirs} found)"]
    for name, path in (("tools", "native"), ("python", "python")):
        ratio, cpu = times[name] / base, CPU[name]
        found = counted(commands[name], root, sink, key)
        cells.append(
            f"{path} {times[name]:.3f}s x{ratio:.2f} (cpu {cpu:.3f}s x{cpu / base_cpu:.2f}, "
            f"{found} found) [{verdict(ratio, STDLIB_TARGET)} target <={STDLIB_TARGET:g}x]"
        )
        record(
            f"{what}, stdlib x5 with binaries ({path} path)",
            f"{times[name] * 1e3:.0f} ms (cpu {cpu * 1e3:.0f} ms, x{cpu / base_cpu:.2f}; "
            f"{found} found)",
            f"`{shown(commands[ref])}` {base * 1e3:.0f} ms (cpu {base_cpu * 1e3:.0f} ms; "
            f"{theirs} found)",
            ratio,
            STDLIB_TARGET,
        )
    return " | ".join(cells)


def install_note() -> str:
    """How this interpreter finds the package, and what starting it costs: every
    tool row pays the start once per run (rg, fd and find pay almost nothing)."""
    probe = "import sys; print(any(m.startswith('__editable__') for m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    ).stdout.strip()
    kind = (
        "an editable install's import finder loads with site (~14 ms per process)"
        if loaded == "True"
        else "no editable-install finder at start-up"
    )
    starts = {}
    for label, argv in {
        "site": [sys.executable, "-c", "pass"],
        "no site": [sys.executable, "-S", "-c", "pass"],
    }.items():
        times = []
        for _ in range(7):
            started = time.perf_counter()
            subprocess.run(argv, check=False)
            times.append(time.perf_counter() - started)
        starts[label] = statistics.median(times)
    return (
        f"{kind}; interpreter start {starts['site'] * 1e3:.0f} ms with site, "
        f"{starts['no site'] * 1e3:.0f} ms without (included in every tools time below)"
    )


def importable(module: str) -> bool:
    probe = [sys.executable, "-c", f"import {module}"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def native_note(root: Path) -> str:
    probe = "import tools.native as n, tools; print(n.NATIVE is not None, tools.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=False
    )
    loaded, _, where = out.stdout.strip().partition(" ")
    if loaded != "True":
        return "tools._native is NOT built: the tools rows measure the pure-Python path"
    return f"tools from {Path(where).parent} with tools._native (C, system RE2)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = os.environ.get("BASTION_BENCH_DIR") or str(REPO / "bench-data")
    parser.add_argument("--dir", default=default)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="tree,stdlib", help="rows: tree, stdlib")
    opts = parser.parse_args()
    root = Path(opts.dir).resolve()
    if "tree" in opts.only:
        ensure_tree(root)
    bins = ensure_binaries()
    # One-shot runs should not pay to compile the package (PYTHONDONTWRITEBYTECODE
    # may be set); an installed package ships its bytecode too.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tools")], check=False)
    env_note = f"python {sys.version.split()[0]}, {os.cpu_count()} cpu(s), runs={opts.runs}"
    print(f"tree: {root} ({SPEC}); {env_note}")
    print("tools run with --limits unbounded and max_results=1e9; output to a file for all")
    print(install_note())
    with tempfile.TemporaryDirectory() as tmp:
        sink = Path(tmp) / "out"
        if not importable("tools"):  # a venv without bastion installed: the source tree
            os.environ["PYTHONPATH"] = str(REPO)
        root.parent.mkdir(parents=True, exist_ok=True)
        print(native_note(root.parent))
        if "tree" in opts.only:
            for line in bench_search(root, bins, opts.runs, sink) + bench_glob(
                root, bins, opts.runs, sink
            ):
                print(line, flush=True)
        if "stdlib" in opts.only:
            stdlib_root = root.with_name(root.name + "-stdlib")
            ensure_stdlib_tree(stdlib_root)
            print(f"tree: {stdlib_root} ({STDLIB_SPEC})")
            for line in bench_stdlib(stdlib_root, bins, opts.runs, sink):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
