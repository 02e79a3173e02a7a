"""Developer sessions: tests, lint, typecheck, snapshots, bench.

nox -s tests        the whole suite (what .ci/run runs, in a nox venv)
nox -s lint         ruff check + ruff format --check
nox -s typecheck    mypy strict on runtime/, tools/, tui/ and themes/
nox -s snapshots    the TUI snapshot tests (pass --snapshot-update after -- to regenerate)
nox -s bench        benchmarks, printed as ratios against references run alongside
nox -s sanitize     the tools tests with tools._native built under ASan and UBSan
nox -s crash        50 runs at once, 20 request-key races, 100 kills mid-stream (issue 25)
nox -s textual_next the tui tests on the newest Textual (pre-releases too): a report,
                    never a failure (the pin in pyproject.toml is what users get)
"""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", "runtime", "tools", "tui", "themes", "tests", "noxfile.py")
    session.run("ruff", "format", "--check", "runtime", "tools", "tui", "themes", "tests")


@nox.session(name="textual_next")
def textual_next(session: nox.Session) -> None:
    """What the next Textual breaks, before a user on it finds out: the tui tests and
    the type check (tui/textual_compat.py fences the internals bastion relies on)
    on the newest Textual. Snapshots drawn by the pinned one may differ: they skip."""
    session.install("-e", ".[test]")
    session.install("--upgrade", "--pre", "textual")
    session.run("python", "-c", "import textual; print('textual', textual.__version__)")
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "tests/tui",
        "tests/test_typecheck.py",
        *session.posargs,
        success_codes=[0, 1],
        silent=False,
    )


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".", "mypy>=1.10")
    session.run("mypy")


@nox.session
def snapshots(session: nox.Session) -> None:
    """The TUI snapshots; `nox -s snapshots -- --snapshot-update` redraws them and
    copies the accepted SVGs to screenshots/ for the README."""
    session.install("-e", ".[test]")
    files = [
        "tests/tui/test_snapshots.py",
        "tests/tui/test_snapshots_approval.py",
        "tests/tui/test_theme_snapshots.py",
        "tests/tui/test_picker_snapshots.py",
        "tests/tui/test_snapshots_app.py",
        "tests/tui/test_trust_screen.py",
    ]
    session.run("python", "-m", "pytest", *files, *session.posargs)
    if "--snapshot-update" in session.posargs:
        session.run("python", "-m", "tests.tui.test_snapshots")
        session.run("python", "-m", "tests.tui.test_snapshots_approval")
        # (tests/tui/test_screenshots_current.py fails while a screenshot is stale)


@nox.session
def bench(session: nox.Session) -> None:
    """Whole-process ratios: bastion -p (200 KB and a one-word answer) vs bare httpx;
    tools vs rg/grep and fd/find on a generated tree and on the stdlib x5 with binaries
    and an ignored folder (native and Python paths); the store's checkpoint cost, bytes
    per byte of text, `-p -c` on a long session, and `sessions`/`sessions search` vs
    sqlite3 plus `python -c pass`; the token estimate's speed and error against
    published provider counts; the app in tmux vs bastion -p, a minimal Textual app and
    `python -c pass`; the app's CPU while a 400 chars/s answer streams, key echo while
    2 MB streams vs the idle app, and a 2,000-turn session vs a 20-turn one (open,
    scroll to the top, search, resume); launch with and without an MCP server
    configured; 4 reads of one turn run together vs 2 one after another."""
    # A regular install, as a user has it: no editable-install import hook at start-up.
    session.install(".")
    # bench_tokens' computed rows: the o200k_base ranks quicktok-v1 ships (checked
    # against OpenAI's sha256 before use), since tiktoken cannot download them here.
    session.install("quicktok-v1")
    # Every script records its rows with a reference and a target here; the table
    # at the end gathers them, with the machine's load beside each.
    rows = Path(session.create_tmp()) / "rows.jsonl"
    rows.unlink(missing_ok=True)
    session.env["BASTION_BENCH_ROWS"] = str(rows)
    session.run("python", "tests/bench/bench_stream.py", *session.posargs)
    session.run("python", "tests/bench/bench_tools.py")
    session.run("python", "tests/bench/bench_sandbox.py")
    session.run("python", "tests/bench/bench_store.py")
    session.run("python", "tests/bench/bench_tokens.py")
    session.run("python", "tests/bench/bench_app.py")
    # The app's CPU while a slow answer streams, key echo while a fast one does, and a
    # 2,000-turn session opened, scrolled, searched and resumed (issue 28).
    session.run("python", "tests/bench/bench_live.py")
    # MCP at launch: with and without a server configured (the mcp extra installed).
    session.install(".[mcp]")
    session.run("python", "tests/bench/bench_mcp.py")
    session.run("python", "tests/bench/bench_parallel.py")
    session.run("python", "tests/bench/rows.py", str(rows))


@nox.session
def sanitize(session: nox.Session) -> None:
    """tools._native built with AddressSanitizer and UBSan, then the tools tests (both
    paths) and a large search under them; any report fails the session. The build
    has the allocation-failure hook (-DBASTION_FAULTS: ``_native._fail_alloc``), so
    test_native's fault cases run here, and a missing module fails rather than skips."""
    flags = "-fsanitize=address,undefined -fno-omit-frame-pointer -g -O1"
    faults = flags + " -DBASTION_FAULTS"
    session.install("-e", ".[test]", env={"CFLAGS": faults, "LDFLAGS": flags})
    libs = [
        session.run("gcc", f"-print-file-name={lib}", silent=True, external=True).strip()
        for lib in ("libasan.so", "libubsan.so")
    ]
    env = {
        "LD_PRELOAD": " ".join(libs),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "BASTION_REQUIRE_NATIVE": "1",
        # Python's own allocator hides PyMem_* blocks from ASan (a double PyMem_Free
        # corrupts its free lists and crashes later, elsewhere); plain malloc shows it.
        "PYTHONMALLOC": "malloc",
    }
    # The one test that starts Python with a scrubbed environment cannot preload ASan.
    session.run("python", "-m", "pytest", "tests/tools", "-k", "not stays_lean", env=env)
    session.install("-e", ".")  # back to a normal build for the other sessions


@nox.session
def crash(session: nox.Session) -> None:
    """Faults at the edges (issue 25): 50 `bastion -p` runs at once, 20 races of 8
    processes with one `--request-key`, and 100 kills mid-stream with the worst text
    lost printed against the bound (one checkpoint interval of what was shown); any
    traceback on stderr, a second session or run for a key, a process reporting
    another session, or a loss past twice the bound fails it."""
    session.install(".")
    session.run("python", "tests/bench/bench_faults.py", *session.posargs)
