"""Benchmark: the Textual app in a real terminal (tmux), each figure beside its reference.

    python tests/bench/bench_app.py [--runs 3] [--only stream,echo,open,launch,memory,version]
    (echo is left out unless named: `nox -s bench` runs it from bench_live.py)

- a 200 KB and a 2 MB markdown answer streamed through `bastion` (launch to its last
  line on screen with the run done) vs `bastion -p` on the same loopback stream;
- the largest gap between checkpoints (ledger rows 'entry.text_appended', their
  `time`) while the app streams the 2 MB answer, and in print mode;
- key echo while the app streams (a key sent to it appearing in the prompt, both through
  one tmux control-mode client), p50/p99 over the keys of `--runs` streams, vs the
  idle app (settled: no CPU use);
- opening a 500- and a 5,000-entry session (`bastion -r ID`) to a ready prompt with
  the last entry on screen vs a 2-entry session, launch to idle (CPU under 2% for
  0.5 s) and RSS then, the RSS and CPU being the app's, its harness process's and its
  renderer process's together;
- launch to a ready prompt vs a minimal Textual app with an Input;
- the idle app on a 2-message session (`bastion -r ID`, settled) with its harness
  process parked (`idle_park = 1` in the bench's config: tui.parking), and not parked
  (`idle_park = 0`): the RSS of all its processes summed vs the same minimal Textual
  app's, idle too;
- `bastion --version` vs `python -c pass`.

Every run is a fresh process against `runtime.testing`'s loopback server; nothing
touches the network. Run by `nox -s bench`; not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from rows import record
from terminal import (
    Terminal,
    checkpoint_times,
    family,
    largest_gap,
    markdown_answer,
    rss_mib,
    wait_idle,
)

from runtime.testing.process import LoopbackProcess

BIN = Path(sys.executable).parent
BASTION = str(BIN / "bastion")
MODEL = "openai/bench"
SIZE = (100, 30)
ROWS: list[tuple[str, str, str, str, str]] = []

MINIMAL_APP = """
from textual.app import App
from textual.widgets import Input
class Minimal(App):
    def compose(self):
        yield Input(placeholder="minimal app ready")
Minimal().run()
"""


def row(what: str, ours: str, reference: str, ratio: str = "", target: str = "") -> None:
    ROWS.append((what, ours, reference, ratio, target))
    print(f"  {what}: {ours} | {reference} | {ratio} {target}", flush=True)


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def environment(home: Path, server: LoopbackProcess | None) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TZ")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        TERM="xterm-256color",
        COLORTERM="truecolor",
        BASTION_HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        LANG=os.environ.get("LANG", "C.UTF-8"),
    )
    # Nothing is sent to a model unless a server is given: a closed port otherwise.
    env["OPENAI_BASE_URL"] = server.base_url if server is not None else "http://127.0.0.1:9/v1"
    return env


@contextmanager
def terminal(workdir: Path) -> Iterator[Terminal]:
    term = Terminal(workdir)
    try:
        yield term
    finally:
        term.kill()


def fresh(base: Path, name: str) -> Path:
    path = base / f"{name}-{time.monotonic_ns()}"
    (path / "work").mkdir(parents=True)
    return path


# --- streaming ------------------------------------------------------------------


def print_mode_run(base: Path, server: LoopbackProcess, expect: str) -> tuple[float, float]:
    """`bastion -p` once: (seconds, largest checkpoint gap)."""
    run = fresh(base, "print")
    env = environment(run / "home", server)
    start = time.perf_counter()
    out = subprocess.run(
        [BASTION, "-p", "go", "--model", MODEL],
        env=env,
        cwd=run / "work",
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - start
    if out.returncode != 0 or expect not in out.stdout:
        raise SystemExit(f"bastion -p failed (exit {out.returncode}): {out.stderr[-500:]}")
    return elapsed, largest_gap(checkpoint_times(run / "home" / "bastion.sqlite"))


def app_run(
    base: Path,
    server: LoopbackProcess,
    expect: str,
    during: Callable[[Terminal], object] | None = None,
) -> tuple[float, float, object]:
    """The app with the prompt on its command line, to `expect` on screen and the run done:
    (seconds, largest checkpoint gap, what `during` returned while it streamed)."""
    run = fresh(base, "app")
    env = environment(run / "home", server)
    with terminal(run) as term:
        start = term.start([BASTION, "--model", MODEL, "go"], env, run / "work", SIZE)
        extra = during(term) if during is not None else None
        done, _ = term.wait_for(
            lambda s: expect in s and "done" in s, "the whole answer", timeout=900, poll=0.05
        )
    return done - start, largest_gap(checkpoint_times(run / "home" / "bastion.sqlite")), extra


def bench_stream(base: Path, size: int, runs: int) -> None:
    text = markdown_answer(size)
    expect = f"END OF ANSWER {size}"
    turns = [{"text": text, "chunk_size": 4}] * (2 * runs + 2)
    label = f"{size // 1000} KB" if size < 1_000_000 else f"{size // 1_000_000} MB"
    with LoopbackProcess.start(turns, fresh(base, "server")) as server:
        prints, apps, print_gaps, app_gaps = [], [], [], []
        for _ in range(runs):
            seconds, gap = print_mode_run(base, server, expect)
            prints.append(seconds)
            print_gaps.append(gap)
            seconds, gap, _ = app_run(base, server, expect)
            apps.append(seconds)
            app_gaps.append(gap)
    ours, ref = statistics.median(apps), statistics.median(prints)
    events = -(-len(text) // 4)
    row(
        f"stream a {label} markdown answer ({events} events), launch to last line",
        f"{ours:.2f} s",
        f"bastion -p: {ref:.2f} s",
        f"{ours / ref:.2f}x",
        f"<= 2x: {verdict(ours / ref <= 2)}",
    )
    if size >= 1_000_000:
        worst = max(app_gaps)
        row(
            f"largest checkpoint gap while the app streams {label}",
            f"{worst * 1000:.0f} ms",
            f"bastion -p: {max(print_gaps) * 1000:.0f} ms",
            "",
            f"<= 250 ms: {verdict(worst <= 0.25)}",
        )


# --- key echo -------------------------------------------------------------------


def prompt_keys(screen: str, key: str = "z") -> int:
    """How many `key`s the prompt box (the bordered lines at the bottom) shows."""
    return sum(line.count(key) for line in screen.splitlines()[-6:] if "│" in line)


def echo_samples(
    term: Terminal,
    count: int,
    until: Callable[[str], bool] | None = None,
    keys: Callable[[str], int] = prompt_keys,
) -> list:
    """Send `z` and time it to the prompt, `count` times (or until `until(screen)`);
    `keys(screen)`: how many `z`s the prompt shows."""
    samples: list[float] = []
    for _ in range(count):
        before = keys(term.screen())
        sent = time.monotonic()
        term.send("z", literal=True)
        seen, screen = term.wait_for(
            lambda s, before=before: keys(s) > before, "the key echo", 60, poll=0.002
        )
        samples.append(seen - sent)
        if until is not None and until(screen):
            break
        time.sleep(0.03)  # the pace of the typed keys whose echo is timed
    return samples


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


MINIMAL_KEYS = 80  # keys whose echo is timed in the minimal app (its Input is 96 wide)


def minimal_echo(base: Path, count: int) -> list[float]:
    """Key echo in a minimal Textual app (an Input), `count` keys, as `echo_samples`."""
    minimal_file = base / "minimal_app.py"
    minimal_file.write_text(MINIMAL_APP)
    run = fresh(base, "minimal")
    with terminal(run) as term:
        term.start([sys.executable, str(minimal_file)], environment(run / "home", None),
                   run / "work", SIZE)  # fmt: skip
        term.wait_for(lambda s: "minimal app ready" in s, "the minimal app", 60)
        wait_idle(term.app_pid())
        return echo_samples(term, count, keys=lambda s: s.count("z"))


def bench_echo(base: Path, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Keys sent while the app streams 2 MB, `runs` times, pooled: a p99 needs more keys
    than one stream takes (about 25); the idle app gets as many, and a minimal Textual
    app. Returns (the echo times while streaming, the idle ones, the minimal app's);
    bench_live.py records the rows."""
    size = 2_000_000
    busy: list[float] = []
    with LoopbackProcess.start(
        [{"text": markdown_answer(size), "chunk_size": 4}] * runs, fresh(base, "s")
    ) as server:

        def during(term: Terminal) -> list[float]:
            term.wait_for(lambda s: "Section" in s, "the stream to start", 60, poll=0.01)
            return echo_samples(term, 200, until=lambda s: "done" in s)

        for _ in range(runs):
            _, _, samples = app_run(base, server, f"END OF ANSWER {size}", during)
            assert isinstance(samples, list)
            busy += samples
    run = fresh(base, "idle")
    with terminal(run) as term:
        term.start([BASTION, "--model", MODEL], environment(run / "home", None), run / "work", SIZE)
        # Idle: the session open, its first view drawn (the status line's context field
        # comes with it) and the app settled (no CPU use): not its first moments.
        term.wait_for(lambda s: "Ask Bastion" in s and "ctx " in s, "the open session", 60)
        wait_idle(term.app_pid())
        idle = echo_samples(term, len(busy))
    # (its Input shows one line: past its width the `z`s typed scroll out of sight)
    minimal = minimal_echo(base, min(len(busy), MINIMAL_KEYS))
    p50, p99 = percentile(busy, 0.5), percentile(busy, 0.99)
    row(
        f"key echo while streaming 2 MB, p50 / p99 ({len(busy)} keys over {runs} streams)",
        f"{p50 * 1000:.0f} / {p99 * 1000:.0f} ms",
        f"idle app: {percentile(idle, 0.5) * 1000:.0f} / {percentile(idle, 0.99) * 1000:.0f} ms",
        "",
        f"p99 < 50 ms: {verdict(p99 < 0.05)}",
    )
    return busy, idle, minimal


# --- opening long sessions ------------------------------------------------------


def canned_answer(i: int) -> str:
    return (
        f"### Answer {i}\n\nThe **ledger** keeps every step; `checkpoint` {i} is committed.\n\n"
        f"- first point of {i}\n- second point\n\n```python\nprint({i})\n```\n"
    )


async def build_session(home: Path, cwd: Path, entries: int) -> str:
    """A conversation of `entries` entries (question/answer pairs) in `home`'s store.

    The first pairs are real runs (the public API); the rest are written straight to
    the store in batches, since running thousands of turns rebuilds the whole context
    each time (quadratic). If the store's writer changes shape, everything goes
    through the public API instead (slow, but the same session).
    """
    from runtime import Harness
    from runtime.testing.scripted import ScriptedProvider, ScriptedTurn

    turns = entries // 2
    texts = [canned_answer(i) for i in range(turns - 1)] + [f"LAST ENTRY {entries}"]
    provider = ScriptedProvider([ScriptedTurn(text=t) for t in texts])
    harness = await Harness.open(home / "bastion.sqlite", resolve_model=lambda s: (provider, "b"))
    try:
        conv = await harness.create_conversation(str(cwd), settings={"model": MODEL})
        await harness.drive(conv.id)
        done = 0
        for i in range(min(turns, 4)):
            await run_turn(harness, conv.id, i)
            done += 1
        await harness.release(conv.id)
        with suppress(AttributeError, TypeError):
            done = await seed_entries(harness, conv.id, done, turns, texts)
        await harness.drive(conv.id)
        for i in range(done, turns):  # whatever seeding did not write
            await run_turn(harness, conv.id, i)
        return conv.id
    finally:
        await harness.close()


async def run_turn(harness: object, conv_id: str, i: int) -> None:
    item = await harness.submit(conv_id, f"question {i}")  # type: ignore[attr-defined]
    await harness.wait(item.id, conv_id, poll=0.05)  # type: ignore[attr-defined]


async def seed_entries(harness: object, conv_id: str, start: int, turns: int, texts: list) -> int:
    """Question/answer entries `start`..`turns` through the store's writer, 200 a commit."""
    from runtime.model.ids import uuid7
    from runtime.model.records import Entry

    store = harness.store  # type: ignore[attr-defined]
    done = start
    while done < turns:
        upto = min(turns, done + 100)

        def add(tx: object, first: int = done, last: int = upto) -> None:
            for i in range(first, last):
                now = time.time()
                for kind, text in (("user", f"question {i}"), ("assistant", texts[i])):
                    tx.add_entry(Entry(uuid7(), conv_id, 0, kind, "complete", text, now))  # type: ignore[attr-defined]

        await store.transact(conv_id, add)
        done = upto
    return done


def open_once(run: Path, conv_id: str, entries: int) -> tuple[float, float, float]:
    """`bastion -r` on the session in `run`: (launch to a ready prompt with the last entry
    on screen, RSS in MiB once idle (the whole view drawn, the renderer process started),
    launch to idle)."""
    marker = f"LAST ENTRY {entries}"
    with LoopbackProcess.start([], fresh(run, "server")) as server, terminal(run) as term:
        env = environment(run / "home", server)
        start = term.start([BASTION, "-r", conv_id], env, run / "work", SIZE)
        pid = term.app_pid()
        ready, _ = term.wait_for(lambda s: marker in s and "Ask Bastion" in s, "the end", 120)
        idle = wait_idle(pid, timeout=300)
        rss = rss_mib(pid)
    return ready - start, rss, idle - start


def bench_open(base: Path, runs: int) -> None:
    """Opening a 500- and a 5,000-entry session, each against a 2-entry one opened in the
    same rounds (the app's own start-up), medians of `runs` rounds."""
    sizes = (2, 500, 5000)
    sessions = {}
    for entries in sizes:
        run = fresh(base, f"open{entries}")
        built = time.perf_counter()
        conv_id = asyncio.run(build_session(run / "home", run / "work", entries))
        sessions[entries] = (run, conv_id, time.perf_counter() - built)
    found: dict[int, list[tuple[float, float, float]]] = {n: [] for n in sizes}
    for _ in range(runs):
        for entries, (run, conv_id, _) in sessions.items():
            found[entries].append(open_once(run, conv_id, entries))
    ref = statistics.median(f[0] for f in found[2])
    for entries in sizes[1:]:
        ready = statistics.median(f[0] for f in found[entries])
        rss, idle = found[entries][-1][1:]
        big = entries >= 5000
        row(
            f"open a {entries}-entry session to a ready prompt, last entry on screen",
            f"{ready:.2f} s",
            f"a 2-entry session: {ref:.2f} s (built in {sessions[entries][2]:.0f} s)",
            f"{ready / ref:.2f}x",
            f"< 1 s: {verdict(ready < 1.0)}" if big else "",
        )
        row(
            f"  RSS after opening {entries} entries, once idle (the app, its harness and"
            " renderer processes)",
            f"{rss:.0f} MiB",
            "",
            "",
            f"< 150 MiB: {verdict(rss < 150)}" if big else "",
        )
        row(f"  launch to idle (CPU < 2% over 0.5 s), {entries} entries", f"{idle:.2f} s", "")


# --- start-up -------------------------------------------------------------------


def launch_time(base: Path, argv: list[str], ready: Callable[[str], bool]) -> float:
    run = fresh(base, "launch")
    with terminal(run) as term:
        start = term.start(argv, environment(run / "home", None), run / "work", SIZE)
        seen, _ = term.wait_for(ready, "a ready prompt", 60, poll=0.005)
    return seen - start


def bench_launch(base: Path, runs: int) -> None:
    minimal_file = base / "minimal_app.py"
    minimal_file.write_text(MINIMAL_APP)
    minimal_argv = [sys.executable, str(minimal_file)]
    ours_argv = [BASTION, "--model", MODEL]
    launch_time(base, minimal_argv, lambda s: "minimal app ready" in s)  # warm the page cache
    launch_time(base, ours_argv, lambda s: "Ask Bastion" in s and MODEL in s)
    minimal, ours = [], []
    for _ in range(runs):
        minimal.append(launch_time(base, minimal_argv, lambda s: "minimal app ready" in s))
        ours.append(launch_time(base, ours_argv, lambda s: "Ask Bastion" in s and MODEL in s))
    a, b = statistics.median(ours), statistics.median(minimal)
    row(
        "launch to a ready prompt",
        f"{a:.2f} s",
        f"minimal Textual app: {b:.2f} s",
        f"{a / b:.2f}x",
        f"<= 1.3x: {verdict(a / b <= 1.3)}",
    )
    record(
        f"launch to a ready prompt (median of {runs})",
        f"{a:.2f} s",
        f"minimal Textual app {b:.2f} s",
        a / b,
        1.3,
    )


# --- memory ---------------------------------------------------------------------


def process_name(pid: int) -> str:
    """A short name for one of the app's processes: its module (`-m tui.child`) or script."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [a.decode(errors="replace") for a in argv if a]
    if "-m" in words[:-1]:
        return words[words.index("-m") + 1]
    return Path(words[1] if len(words) > 1 else words[0]).name


def own_memory_mib(pid: int) -> tuple[float, float]:
    """The RSS and PSS of `pid` alone (PSS: the pages it shares, such as the Python
    library and libcrypto, divided among the processes sharing them)."""
    found = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss"):
            found[key] = int(value.split()[0]) / 1024
    return found["Rss"], found["Pss"]


def idle_memory(term: Terminal) -> dict[str, tuple[float, float]]:
    """Once the command in `term` has settled: the RSS and PSS (MiB) of each of its
    processes, by name."""
    pid = term.app_pid()
    wait_idle(pid, timeout=120)
    found: dict[str, tuple[float, float]] = {}
    for member in family(pid):
        with suppress(FileNotFoundError, ProcessLookupError):
            rss, pss = own_memory_mib(member)
            name = process_name(member)
            before = found.get(name, (0.0, 0.0))
            found[name] = (before[0] + rss, before[1] + pss)
    return found


def summed(found: dict[str, tuple[float, float]]) -> tuple[float, float]:
    return sum(r for r, _ in found.values()), sum(p for _, p in found.values())


#: The bench's own idle time before the app's harness process parks (tui.parking; the
#: default is 60 s): short, so the parked figure is measured without a minute's wait.
BENCH_IDLE_PARK = 1


def idle_app(term: Terminal, session: Path, conv_id: str, park: float) -> dict:
    """The idle app on the session with `idle_park = park`: its processes' memory once
    idle (parked first, when `park` is more than 0: its harness process gone)."""
    config = session / "home" / "config" / "bastion"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f"idle_park = {park}\n")
    env = environment(session / "home", None)
    term.start([BASTION, "-r", conv_id], env, session / "work", SIZE)
    term.wait_for(lambda s: "LAST ENTRY 2" in s and "Ask Bastion" in s, "the session", 60)
    if park:
        pid = term.app_pid()
        deadline = time.monotonic() + 60 + park
        while any(b"tui.child" in _cmdline(p) for p in family(pid)):
            if time.monotonic() > deadline:
                raise SystemExit("the app's harness process did not park")
            time.sleep(0.1)  # (poll interval)
    return idle_memory(term)


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has exited (or while it is a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def bench_memory(base: Path, runs: int) -> None:
    """The idle app on a 2-message session vs the idle minimal Textual app, RSS of all
    processes summed, the three measured in turn `runs` times (medians): the app parked
    (its harness process gone after BENCH_IDLE_PARK s) and, for honesty, not parked."""
    minimal_file = base / "minimal_rss.py"
    minimal_file.write_text(MINIMAL_APP)
    session = fresh(base, "mem")
    conv_id = asyncio.run(build_session(session / "home", session / "work", 2))
    ours: dict[float, list[tuple[float, float]]] = {BENCH_IDLE_PARK: [], 0: []}
    minimal: list[tuple[float, float]] = []
    parts: dict[float, dict] = {}
    for _ in range(runs):
        run = fresh(base, "minimal")
        with terminal(run) as term:
            env = environment(run / "home", None)
            term.start([sys.executable, str(minimal_file)], env, run / "work", SIZE)
            term.wait_for(lambda s: "minimal app ready" in s, "the minimal app", 60)
            minimal.append(summed(idle_memory(term)))
        for park in ours:
            with terminal(session) as term:
                parts[park] = idle_app(term, session, conv_id, park)
                ours[park].append(summed(parts[park]))
    b, pss_b = (statistics.median(r for r, _ in minimal), statistics.median(p for _, p in minimal))
    for park, found in ours.items():
        a, pss_a = (statistics.median(r for r, _ in found), statistics.median(p for _, p in found))
        each = ", ".join(f"{name} {rss:.0f}" for name, (rss, _) in parts[park].items())
        what = (
            f"idle app with a 2-message session, parked (idle_park = {park} s in the bench's "
            "config), RSS of all its processes"
            if park
            else "the same, not parked (idle_park = 0), for comparison"
        )
        row(
            what,
            f"{a:.0f} MiB ({each}; PSS {pss_a:.0f})",
            f"minimal Textual app: {b:.1f} MiB (PSS {pss_b:.1f})",
            f"{a / b:.2f}x (PSS {pss_a / pss_b:.2f}x)",
            f"<= 2x: {verdict(a / b <= 2)}" if park else "",
        )
        if park:
            record(
                f"idle app with a 2-message session, parked, RSS of all its processes "
                f"(median of {runs})",
                f"{a:.0f} MiB",
                f"minimal Textual app {b:.1f} MiB",
                a / b,
                2.0,
            )


def process_time(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_version(runs: int) -> None:
    process_time([BASTION, "--version"], 3)
    ref = process_time([sys.executable, "-c", "pass"], runs)
    ours = process_time([BASTION, "--version"], runs)
    row(
        "bastion --version",
        f"{ours * 1000:.0f} ms",
        f"python -c pass: {ref * 1000:.0f} ms",
        f"{ours / ref:.2f}x",
        f"<= 2x: {verdict(ours / ref <= 2)}",
    )
    ours = process_time([BASTION, "--help"], runs)
    row(
        "bastion --help",
        f"{ours * 1000:.0f} ms",
        f"python -c pass: {ref * 1000:.0f} ms",
        f"{ours / ref:.2f}x",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    # (echo: bench_live.py runs it, beside the app's CPU while streaming)
    parser.add_argument("--only", default="stream,open,launch,memory,version")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not Terminal.available():
        print("bench_app: tmux is not installed; skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp_dir:
        base = Path(tmp_dir)
        print(f"the app in tmux ({os.cpu_count()} cores), each figure beside its reference:")
        if "version" in only:
            bench_version(15)
        if "launch" in only:
            bench_launch(base, max(args.runs, 3))
        if "memory" in only:
            bench_memory(base, args.runs)
        if "stream" in only:
            bench_stream(base, 200_000, args.runs)
            bench_stream(base, 2_000_000, max(1, args.runs - 1))
        if "echo" in only:
            bench_echo(base, args.runs)
        if "open" in only:
            bench_open(base, args.runs)
    print()
    print("| what | bastion | reference | ratio | target |")
    print("|---|---|---|---|---|")
    for what, ours, ref, ratio, target in ROWS:
        print(f"| {what.strip()} | {ours} | {ref} | {ratio} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
