"""Benchmark: what the store costs as answers and sessions grow (issue 7, item 12).

    python tests/bench/bench_store.py [--checkpoints 300] [--turns 1000] [--runs 7]
                                      [--chunks 20,40,80] [--only checkpoint,size,continue]

Three rows, each against a reference measured in the same run:

1. checkpoint: one `Store.transact(conv, tx.append_chunk(entry, "text", offset,
   chunk))` of a 200-character chunk on an entry that already holds 2 MB of
   committed chunks vs on an empty one (median of interleaved checkpoints; target
   within 2x). For the record, the old `UPDATE entries SET text = text || ?` is
   timed the same way at 2 MB.
2. size: the real Harness over a ScriptedProvider runs `--turns` turns, 100 to a
   conversation (a run reads its conversation once, so one 1,000-turn conversation
   costs O(n^2) time here; the bytes per turn are the same) (a 100-300
   character prompt, a 2-4 KB answer streamed in chunks with checkpoint_interval=0,
   so every chunk is a checkpoint), once for each of `--chunks` (20, 40, 80: what
   100 ms checkpoints hold at 200, 400 and 800 characters a second, the speeds
   models stream at; issue 28); then `PRAGMA wal_checkpoint(TRUNCATE)` and the
   file's pages (page_count * page_size) vs the characters of text (target <= 2x
   at 400 and 800; 200 reported), a VACUUMed copy beside it, and where the pages
   are per table from `dbstat` when SQLite has it. For the record, the real 100 ms
   timer then streams `--streams` answers at once at each speed and says how many
   characters its checkpoints held.
3. continue: the installed `bastion -p -c "one more"` against the loopback server
   on a 5,000-message conversation vs a 2-message one in the same store, runs
   interleaved: time from process start to the request arriving at the server
   and the child's peak RSS (/usr/bin/time), medians (target <= 1.5x each). The long
   conversation (2,500 prompts of ~100 characters, 2,500 answers of ~300, each
   with its inbox item, run and ledger events) is written with the real `Tx`
   mutations in a few large transactions; the store is restored from a copy before
   each run, so every run sees exactly 5,000 and 2 messages.

4. search: 1,000 sessions x 100 entries, `Store.search` for a common, a mid and a
   rare word, two common words and a phrase of them (target < 100 ms each), and the
   store size the FTS5 index adds.

Run by `nox -s bench`. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rows import record

from runtime import Harness
from runtime.harness import new_conversation
from runtime.model.ids import uuid7
from runtime.model.records import (
    Entry,
    EntryKind,
    EntryStatus,
    InboxItem,
    InboxMode,
    InboxState,
    Run,
    RunState,
)
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.store import marks
from runtime.store.database import Store
from runtime.store.fulltext import _without_positions as without_positions
from runtime.store.tx import Tx
from runtime.testing.scripted import ScriptedProvider, ScriptedTurn
from runtime.testing.server import LoopbackServer

WORDS = ("stream", "durable", "ledger", "answer", "tokens", "bastion", "model", "commit", "é")
MB = 1 << 20


def prose(size: int, seed: int) -> str:
    """`size` characters of word-like text (one non-ASCII letter among the words)."""
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS) + (" " if rng.random() > 0.08 else ".\n")
        out.append(word)
        length += len(word)
    return "".join(out)[:size]


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "MISSED"


def row(what: str, ours: str, ref: str, ratio: float, target: float, table: str = "") -> None:
    """Print one row; with `table` (its name in the closing table), record it too."""
    print(
        f"  {what}: {ours} vs {ref} -> {ratio:.2f}x (target <= {target:g}x: {verdict(ratio, target)})"
    )
    if table:
        record(table, ours, ref, ratio, target)


# --- 1. checkpoint cost ---------------------------------------------------------


def streaming_entry(conversation_id: str) -> Entry:
    return Entry(
        uuid7(), conversation_id, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", time.time()
    )


async def bench_checkpoint(home: Path, count: int) -> None:
    store = await Store.open(home / "checkpoint.sqlite")
    try:
        conv, _ = await store.create_conversation(new_conversation(str(home)))
        cid = conv.id
        big = await store.transact(cid, lambda tx: tx.add_entry(streaming_entry(cid)))
        # 2 MB committed the way a stream commits it: 256-character chunks (8,192 rows),
        # written here in 16 transactions to be quick.
        filler = prose(2 * MB, 1)
        step = 256

        def fill(start: int, stop: int) -> Callable[[Tx], int]:
            def body(tx: Tx) -> int:
                end = start
                for at in range(start, stop, step):
                    end = tx.append_chunk(big.id, "text", at, filler[at : at + step])
                return end

            return body

        big_end = 0
        for part in range(16):
            big_end = await store.transact(cid, fill(part * MB // 8, (part + 1) * MB // 8))
        assert big_end == 2 * MB
        # The empty case: a fresh streaming entry for each checkpoint, so each is at 0 bytes.
        smalls = await store.transact(
            cid, lambda tx: [tx.add_entry(streaming_entry(cid)).id for _ in range(count)]
        )
        # The old way, for the record: the text column rewritten in place (no chunks).
        old = await store.transact(cid, lambda tx: tx.add_entry(streaming_entry(cid)))
        await store.transact(
            cid, lambda tx: tx.execute("UPDATE entries SET text = ? WHERE id = ?", (filler, old.id))
        )
        chunk = prose(200, 2)

        async def timed(body: Callable[[Tx], object]) -> float:
            start = time.perf_counter()
            await store.transact(cid, body)
            return time.perf_counter() - start

        def append(entry_id: str, offset: int) -> Callable[[Tx], int]:
            return lambda tx: tx.append_chunk(entry_id, "text", offset, chunk)

        def concat(tx: Tx) -> int:
            return tx.execute("UPDATE entries SET text = text || ? WHERE id = ?", (chunk, old.id))

        empty_times: list[float] = []
        big_times: list[float] = []
        old_times: list[float] = []
        for _ in range(5):  # warm the page cache and the statement cache
            await timed(append(big.id, big_end))
            big_end += len(chunk)
        for i in range(count):
            if i % 2 == 0:
                empty_times.append(await timed(append(smalls[i], 0)))
            big_times.append(await timed(append(big.id, big_end)))
            big_end += len(chunk)
            if i % 2 == 1:
                empty_times.append(await timed(append(smalls[i], 0)))
        # Apart: each of these writes 2 MB to the WAL, which would slow whatever follows.
        for _ in range(max(10, count // 10)):
            old_times.append(await timed(concat))
        # Once per entry: closing joins its 8,000-odd chunks into entries.text.
        close_time = await timed(lambda tx: tx.close_entry(big.id, EntryStatus.COMPLETE, {}))
    finally:
        await store.close()
    empty, at_2mb, old_2mb = (
        statistics.median(t) * 1000 for t in (empty_times, big_times, old_times)
    )
    print(f"checkpoint of a {len(chunk)}-character chunk, median of {count} interleaved")
    row(
        "append_chunk at 2 MB vs at 0 bytes",
        f"{at_2mb:.3f} ms",
        f"{empty:.3f} ms",
        at_2mb / empty,
        2.0,
    )
    print(
        f"  for the record, the old UPDATE entries SET text = text || ? at 2 MB: "
        f"{old_2mb:.3f} ms ({old_2mb / empty:.1f}x the chunk at 0 bytes)"
    )
    print(f"  closing the 2 MB entry (its chunks joined, once): {close_time * 1000:.1f} ms")


# --- 2. store bytes per byte of text ---------------------------------------------

#: Characters a model streams a second (issue 28): 200 for a slower model, 400 and 800
#: as models stream today. At 100 ms checkpoints that is 20, 40 and 80 characters a
#: checkpoint: the `--chunks` the size rows stream with checkpoint_interval=0.
SPEEDS = {20: None, 40: 2.0, 80: 2.0}  # characters a checkpoint -> target (None: reported)


async def bench_size(home: Path, turns: int, chunk: int, per_conversation: int) -> None:
    rng = random.Random(3)
    prompts = [prose(rng.randint(100, 300), 10_000 + i) for i in range(turns)]
    answers = [prose(rng.randint(2048, 4096), 20_000 + i) for i in range(turns)]
    provider = ScriptedProvider(ScriptedTurn(text=a, chunk_size=chunk) for a in answers)
    path = home / f"size-{chunk}.sqlite"
    harness = await Harness.open(
        path,
        resolve_model=lambda spec: (provider, spec.split("/", 1)[1]),
        loop_settings=LoopSettings(checkpoint_interval=0.0),
        # A window that holds a whole conversation: an automatic compaction would ask
        # the script for a summary (a turn too many) and add entries of its own.
        config=Config(models={"scripted/bench": {"context_window": 1_000_000}}),
    )
    started = time.perf_counter()
    conv = new_conversation(str(home))
    try:
        for i, prompt in enumerate(prompts):
            if i % per_conversation == 0:
                if i:
                    await harness.release(conv.id)
                conv = new_conversation(str(home), settings={"model": "scripted/bench"})
                await harness.drive(conv.id, interactive=False)
                item = await harness.submit(conv.id, prompt, create=conv)
            else:
                item = await harness.submit(conv.id, prompt)
            run = await harness.wait(item.id, conv.id)
            if run.state != RunState.COMPLETED:
                raise SystemExit(f"turn {i} ended {run.state}: {run.error}")
            provider.requests.clear()  # each request holds the whole conversation
        checkpoints = await harness.store.read(_checkpoints)
    finally:
        await harness.close()
    elapsed = time.perf_counter() - started
    text_chars = sum(map(len, prompts)) + sum(map(len, answers))
    text_bytes = sum(len(t.encode()) for t in (*prompts, *answers))
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        tables = _per_table(db)
        vacuumed = home / f"size-{chunk}-vacuumed.sqlite"
        db.execute("VACUUM INTO ?", (str(vacuumed),))
    finally:
        db.close()
    file_bytes, packed = pages * page_size, vacuumed.stat().st_size
    speed, target = chunk * 10, SPEEDS.get(chunk)
    print(
        f"store size after {turns} streamed turns in {-(-turns // per_conversation)} "
        f"conversations ({elapsed:.1f} s; 2-4 KB answers in {chunk}-character chunks, "
        f"checkpoint_interval=0: {checkpoints} checkpoints, as {speed} characters a "
        f"second make at 100 ms), {text_chars:,} characters of text ({text_bytes:,} bytes "
        "as UTF-8)"
    )
    ratio = file_bytes / text_chars
    ours, text = f"{file_bytes / 1e6:.2f} MB", f"{text_chars / 1e6:.2f} M characters"
    if target is not None:
        row("file (page_count * page_size) per character of text",
            f"{ours} ({free} free pages)", text, ratio, target)  # fmt: skip
    else:
        print(f"  file per character of text: {ours} vs {text} -> {ratio:.2f}x "
              "(reported, no target)")  # fmt: skip
    print(f"  VACUUMed copy per character of text: {packed / 1e6:.2f} MB -> "
          f"{packed / text_chars:.2f}x")  # fmt: skip
    record(
        f"store bytes per character of text: {turns:,} turns streamed at {speed} chars/s "
        f"(100 ms checkpoints of {chunk} characters)"
        + ("" if target is not None else "; reported, no target"),
        ours,
        f"{text} of text",
        ratio,
        target,
    )
    if tables:
        print("  where the pages are: " + ", ".join(f"{n} {b / 1e6:.2f} MB" for n, b in tables))


def _checkpoints(db: sqlite3.Connection) -> int:
    """Text checkpoints stored: marks (runtime.store.marks), and rows of an older store."""
    rows = db.execute("SELECT count(*) FROM ledger WHERE type = 'entry.text_appended'")
    return int(rows.fetchone()[0]) + len(marks.times(db))


async def bench_timer(home: Path, speeds: list[int], streams: int) -> None:
    """The real 100 ms checkpoint timer, for the record: `streams` answers of ~2 KB
    streamed at once at each speed (a chunk every 10 ms), and the characters each
    checkpoint then held, to set beside the size rows' chunks."""
    for speed in speeds:
        answers = [prose(2048, 30_000 + i) for i in range(streams)]
        chunk = max(1, speed // 100)
        provider = ScriptedProvider(
            ScriptedTurn(text=a, chunk_size=chunk, delay=0.01) for a in answers
        )
        harness = await Harness.open(
            home / f"timer-{speed}.sqlite",
            resolve_model=lambda spec, p=provider: (p, spec.split("/", 1)[1]),
        )
        try:
            items = []
            for _ in range(streams):
                conv = new_conversation(str(home), settings={"model": "scripted/bench"})
                await harness.drive(conv.id, interactive=False)
                items.append((await harness.submit(conv.id, "go", create=conv), conv.id))
            for item, cid in items:
                await harness.wait(item.id, cid)
            times = await harness.store.read(marks.times)
        finally:
            await harness.close()
        spans: dict[str, list[float]] = {}
        for cid, _, at in times:
            spans.setdefault(cid, []).append(at)
        took = statistics.median(max(t) - min(t) for t in spans.values())
        print(f"  real timer: {streams} answers at once, {chunk}-character chunks every 10 ms "
              f"({speed} chars/s asked, {2048 / took:.0f} made): {len(times)} checkpoints of "
              f"{sum(map(len, answers)) / len(times):.0f} characters")  # fmt: skip


def _per_table(db: sqlite3.Connection) -> list[tuple[str, int]]:
    try:
        rows = db.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    except sqlite3.Error:
        return []  # SQLite built without the dbstat table
    shown = [(str(n), int(b)) for n, b in rows if b >= MB // 20]
    rest = sum(int(b) for _, b in rows) - sum(b for _, b in shown)
    return [*shown, (f"the other {len(rows) - len(shown)} tables and indexes", rest)]


# --- 3. `bastion -p -c` on a long conversation -------------------------------------


def _long_history(cid: str, turns: range, rng: random.Random) -> Callable[[Tx], None]:
    """`turns` prompts and answers as the harness commits them, with the same Tx calls."""

    def body(tx: Tx) -> None:
        for i in turns:
            stamp = time.time()
            item = InboxItem(
                uuid7(), cid, InboxMode.PROMPT, prose(rng.randint(60, 140), i), InboxState.QUEUED,
                stamp,
            )  # fmt: skip
            run = Run(uuid7(), cid, item.id, RunState.QUEUED, stamp, stamp)
            tx.insert_inbox(item)
            user = Entry(
                uuid7(), cid, 0, EntryKind.USER, EntryStatus.COMPLETE, item.text, stamp,
                run_id=run.id, data={"inbox_id": item.id},
            )  # fmt: skip
            tx.transition_inbox(item.id, InboxState.PLACED, run_id=run.id, entry_id=user.id)
            tx.add_entry(user)
            tx.insert_run(run)
            tx.transition_run(run.id, (RunState.QUEUED,), state=RunState.RUNNING)
            answer = tx.add_entry(
                Entry(
                    uuid7(), cid, 0, EntryKind.ASSISTANT, EntryStatus.STREAMING, "", stamp,
                    run_id=run.id,
                )
            )  # fmt: skip
            text = prose(rng.randint(200, 400), 50_000 + i)
            tx.append_chunk(answer.id, "text", 0, text)
            tx.close_entry(answer.id, EntryStatus.COMPLETE, {})
            usage = {"input_tokens": 10 * i, "output_tokens": len(text) // 4, "quality": "measured"}
            tx.transition_run(
                run.id, (RunState.RUNNING,), state=RunState.COMPLETED, reason="answered",
                result_entry_id=answer.id, usage=usage,
            )  # fmt: skip

    return body


async def build_conversations(home: Path, long_dir: Path, short_dir: Path, messages: int) -> None:
    store = await Store.open(home / "bastion.sqlite")
    rng = random.Random(4)
    try:
        for cwd, turns in ((long_dir, messages // 2), (short_dir, 1)):
            conv = new_conversation(str(cwd), settings={"model": "openai/bench"}, title="bench")
            created, _ = await store.create_conversation(conv)
            for start in range(0, turns, 500):
                batch = range(start, min(turns, start + 500))
                await store.transact(created.id, _long_history(created.id, batch, rng))
    finally:
        await store.close()


TIME = Path("/usr/bin/time")


# --- 4. full-text search -----------------------------------------------------------


def vocabulary_text(rng: random.Random, words: int, vocabulary: list[str]) -> str:
    """`words` words drawn Zipf-like from `vocabulary` (a few words everywhere, most rare)."""
    picks = [vocabulary[min(int(rng.paretovariate(0.7)) - 1, len(vocabulary) - 1)]
             for _ in range(words)]  # fmt: skip
    return " ".join(picks)


async def bench_search(home: Path, sessions: int, entries: int, runs: int) -> None:
    """`sessions` conversations of `entries` entries (prompts of ~25 words, answers of ~60,
    Zipf-distributed over 20,000 words), written with the real Tx mutations; then the
    median time of `Store.search` for a word in every entry, one in about 5%, one in a
    handful and two common words together, and what the index costs in file size (VACUUMed copies with and
    without it). Target: every query < 100 ms."""
    (home / "search").mkdir()
    path = home / "search" / "bastion.sqlite"
    store = await Store.open(path)
    rng = random.Random(12)
    vocabulary = [f"w{n}" for n in range(20_000)]
    started = time.perf_counter()
    try:
        for s in range(sessions):
            conv = new_conversation(f"/bench/{s % 20}", title=f"session {s}")

            def fill(tx: Tx, cid: str = conv.id) -> None:
                for i in range(entries):
                    kind = EntryKind.USER if i % 2 == 0 else EntryKind.ASSISTANT
                    text = vocabulary_text(rng, 25 if i % 2 == 0 else 60, vocabulary)
                    stamp = time.time()
                    tx.add_entry(Entry(uuid7(), cid, 0, kind, EntryStatus.COMPLETE, text, stamp))

            await store.create_conversation(conv, fill)
        built = time.perf_counter() - started
        print(f"search: {sessions} sessions x {entries} entries written in {built:.1f} s")
        # The phrase is answered from the entries holding both words (the index keeps no
        # positions: runtime/store/fulltext.py); its count is of those entries.
        counts = await store.read(
            lambda db: {
                w: db.execute(
                    "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?",
                    (without_positions(w),),
                ).fetchone()[0]
                for w in ("w0", "w40", "w1500", "w0 w1", '"w0 w1"')
            }
        )
        for word, matched in counts.items():
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                hits = await store.search(word)
                times.append(time.perf_counter() - t0)
            ms = statistics.median(times) * 1000
            print(
                f"  query {word!r} ({matched} matching entries, {len(hits)} sessions shown): "
                f"{ms:.1f} ms (target < 100 ms: {'met' if ms < 100 else 'MISSED'})"
            )
    finally:
        await store.close()
    session_commands(path, runs)
    with_index, without = home / "with.sqlite", home / "without.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"VACUUM INTO '{with_index}'")
    db.close()
    shutil.copy(with_index, without)
    db = sqlite3.connect(without)
    db.execute("DROP TABLE entries_fts")
    db.execute("VACUUM")
    db.close()
    a, b = with_index.stat().st_size, without.stat().st_size
    print(
        f"  store size: {a / MB:.1f} MB with the index, {b / MB:.1f} MB without "
        f"(+{(a - b) / MB:.1f} MB, {a / b:.2f}x)"
    )


#: Each session command and the same work in the sqlite3 shell (issue 28, row 1): the
#: query, or for `fork` and `rm` the rows they write (in one transaction, foreign keys
#: on as bastion has them). `{id}` is the newest session; `{new}` a fresh id. Those
#: that write run on a fresh copy of the store each time (the copy is not timed).
_SESSION_COMMANDS = (
    (
        "sessions search w40",
        ["sessions", "search", "w40"],
        "SELECT e.conversation_id, min(f.rank) AS best "
        "FROM entries_fts f JOIN entries e ON e.rowid = f.rowid WHERE entries_fts MATCH 'w40' "
        "GROUP BY e.conversation_id ORDER BY best LIMIT 50",
        False,
    ),
    (
        "doctor",
        ["doctor"],
        "SELECT value FROM meta WHERE key = 'schema_version'",
        False,
    ),
    (
        "sessions --all",
        ["sessions", "--all"],
        "SELECT id, title, cwd, created_at, updated_at FROM conversations "
        "ORDER BY updated_at DESC, id DESC LIMIT 200",
        False,
    ),
    (
        "sessions --all --json",
        ["sessions", "--all", "--json"],
        "SELECT id, title, cwd, settings, created_at, updated_at FROM conversations "
        "ORDER BY updated_at DESC, id DESC LIMIT 200",
        False,
    ),
    (
        "export ID",
        ["export", "{id}"],
        "SELECT * FROM entries WHERE conversation_id = '{id}' ORDER BY position; "
        "SELECT * FROM ledger WHERE conversation_id = '{id}' ORDER BY seq",
        False,
    ),
    (
        "fork ID",
        ["fork", "{id}"],
        "PRAGMA foreign_keys = ON; BEGIN; "
        "INSERT INTO conversations (id, title, cwd, settings, parent_id, version, created_at, "
        "updated_at) SELECT '{new}', title, cwd, settings, id, 1, created_at, updated_at "
        "FROM conversations WHERE id = '{id}'; "
        "INSERT INTO entries (id, conversation_id, position, run_id, kind, status, text, data, "
        "created_at) SELECT id || '-f', '{new}', position, run_id, kind, status, text, data, "
        "created_at FROM entries WHERE conversation_id = '{id}'; COMMIT",
        True,
    ),
    (
        "sessions rm ID",
        ["sessions", "rm", "{id}"],
        "PRAGMA foreign_keys = ON; BEGIN; DELETE FROM conversations WHERE id = '{id}'; "
        "DELETE FROM ledger WHERE conversation_id = '{id}'; COMMIT",
        True,
    ),
)


_FLOOR = (
    "import argparse, json, sqlite3, sys\n"
    "db = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True)\n"
    "print(json.dumps(db.execute(sys.argv[2]).fetchall()))\n"
)


def _command_timer(path: Path, env: dict[str, str]) -> Callable[[list[str], bool], float]:
    """Whole-process seconds of a command; with `fresh`, on a fresh copy of the store
    (made before the clock starts)."""
    pristine = path.with_name("pristine.sqlite")
    if not pristine.exists():
        db = sqlite3.connect(path)
        db.execute(f"VACUUM INTO '{pristine}'")
        db.close()

    def timed(cmd: list[str], fresh: bool = False) -> float:
        if fresh:
            for extra in ("-wal", "-shm"):
                path.with_name(path.name + extra).unlink(missing_ok=True)
            shutil.copyfile(pristine, path)
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode not in (0, 1):  # (doctor: 1 when a check of this machine fails)
            raise SystemExit(f"{cmd} exited {done.returncode}: {done.stderr[-500:]!r}")
        return time.perf_counter() - started

    return timed


def session_commands(path: Path, runs: int) -> None:
    """Whole processes: each of _SESSION_COMMANDS on the search store vs the same work
    in the `sqlite3` shell plus `python -c pass` (doctor also checks the config, the
    sandbox, with a child interpreter, and the search path), runs interleaved, medians
    (target <= 1.5x)."""
    sqlite = shutil.which("sqlite3")
    if sqlite is None:
        print("  session commands: not measured (no sqlite3 shell)")
        return
    bastion = str(Path(sys.executable).parent / "bastion")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BASTION_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["BASTION_HOME"] = str(path.parent)
    db = sqlite3.connect(path)
    newest = db.execute("SELECT id FROM conversations ORDER BY updated_at DESC LIMIT 1").fetchone()
    db.close()
    names = {"id": newest[0], "new": uuid7()}
    timed = _command_timer(path, env)
    for what, args, sql, writes in _SESSION_COMMANDS:
        args, sql = [a.format(**names) for a in args], sql.format(**names)
        ours, ref, floor = [], [], []
        # (.timeout: wait out a checkpoint still closing, as bastion's busy timeout does)
        ours_cmd, ref_cmd = [bastion, *args], [sqlite, "-cmd", ".timeout 5000", str(path), sql]
        # For the record: a Python process running the same query, having imported only
        # what any command line with a store needs (no bastion code at all).
        floor_cmd = [sys.executable, "-c", _FLOOR, str(path), sql.split(";")[0]]
        for i in range(2 * runs + 1):
            if i % 2:
                ours.append(timed(ours_cmd, writes))
            ref.append(timed(ref_cmd, writes) + timed([sys.executable, "-c", "pass"]))
            if not writes:
                floor.append(timed(floor_cmd))
            if not i % 2:
                ours.append(timed(ours_cmd, writes))
        a, b = statistics.median(ours[1:]), statistics.median(ref[1:])
        row(
            f"bastion {what} (whole process)",
            f"{a * 1000:.0f} ms",
            f"sqlite3 + python -c pass {b * 1000:.0f} ms",
            a / b,
            1.5,
            f"`bastion {what}` (1,000 sessions, whole process, median of {runs})",
        )
        if floor:
            c = statistics.median(floor[1:])
            print(
                f"    (python importing argparse, json and sqlite3 and running the query: "
                f"{c * 1000:.0f} ms, {c / b:.2f}x the reference; bastion is {a / c:.2f}x that)"
            )
    if path.with_name("pristine.sqlite").exists():
        for extra in ("-wal", "-shm"):
            path.with_name(path.name + extra).unlink(missing_ok=True)
        shutil.copyfile(path.with_name("pristine.sqlite"), path)


def keep_pristine(home: Path) -> None:
    """Keep a copy of the store as built, so every run starts from 5,000 and 2 messages."""
    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    shutil.copyfile(home / "bastion.sqlite", home / "pristine.sqlite")


def restore(home: Path) -> None:
    for suffix in ("-wal", "-shm"):
        (home / f"bastion.sqlite{suffix}").unlink(missing_ok=True)
    shutil.copyfile(home / "pristine.sqlite", home / "bastion.sqlite")


def one_turn(
    bastion: str, cwd: Path, env: dict[str, str], server: LoopbackServer, out: Path
) -> tuple[float, int | None, int]:
    """(seconds to the request, peak RSS in KB, messages sent) of one `bastion -p -c`.

    The RSS comes from /usr/bin/time, not from wait4 on a child of this process:
    a child spawned by Python (vfork) reports this process's own peak RSS if it is
    higher, since Linux keeps the larger of the two across exec.
    """
    seen = len(server.requests)
    restore(Path(env["BASTION_HOME"]))
    rss = out.with_suffix(".rss")
    cmd = [bastion, "-p", "-c", "one more", "--model", "openai/bench"]
    if TIME.exists():
        cmd = [str(TIME), "-o", str(rss), "-f", "%M", *cmd]
    with open(out, "w") as sink:
        start = time.time()
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink,
            stderr=subprocess.STDOUT, timeout=120,
        )  # fmt: skip
    requests = server.requests[seen:]
    if proc.returncode != 0 or len(requests) != 1:
        raise SystemExit(
            f"bastion -p -c in {cwd} exited {proc.returncode} after {len(requests)} requests: "
            + out.read_text()[-500:]
        )
    peak = int(rss.read_text().split()[-1]) if TIME.exists() else None
    return requests[0].received - start, peak, len(requests[0].body["messages"])


def bench_continue(tmp: Path, messages: int, runs: int) -> None:
    home, long_dir, short_dir = tmp / "home", tmp / "long", tmp / "short"
    for d in (home, long_dir, short_dir):
        d.mkdir()
    built = time.perf_counter()
    asyncio.run(build_conversations(home, long_dir, short_dir, messages))
    keep_pristine(home)
    built = time.perf_counter() - built
    bastion = str(Path(sys.executable).parent / "bastion")
    answer = prose(300, 99)
    # The long session is ~275k tokens: give the unknown bench model a window that holds
    # it, so the row measures reading and sending the session, not compacting it.
    config = tmp / "config" / "bastion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[models."openai/bench"]\ncontext_window = 2000000\n')
    with LoopbackServer([{"text": answer, "chunk_size": 16}] * (2 * runs + 2)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BASTION_"))}
        # As a user has it: bytecode cached (the warm-up runs write it), not compiled per run.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(
            OPENAI_BASE_URL=server.base_url,
            BASTION_HOME=str(home),
            XDG_CONFIG_HOME=str(tmp / "config"),
        )
        log = tmp / "out.txt"
        one_turn(bastion, long_dir, env, server, log)  # warm imports and the page cache
        one_turn(bastion, short_dir, env, server, log)
        results: dict[str, list[tuple[float, int | None, int]]] = {"long": [], "short": []}
        for i in range(runs):
            pair = [("long", long_dir), ("short", short_dir)]
            for name, cwd in pair if i % 2 == 0 else reversed(pair):
                results[name].append(one_turn(bastion, cwd, env, server, log))
    first = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
    fastest = {k: min(r[0] for r in v) for k, v in results.items()}
    peaks = {k: [r[1] for r in v if r[1] is not None] for k, v in results.items()}
    sent = {k: v[-1][2] for k, v in results.items()}
    print(
        f"bastion -p -c, {messages:,}-message vs 2-message conversation in one store "
        f"(built in {built:.1f} s), medians of {runs} interleaved whole-process runs; "
        f"requests of {sent['long']:,} and {sent['short']} messages"
    )
    row(
        "time from start to the request",
        f"{first['long'] * 1000:.0f} ms",
        f"{first['short'] * 1000:.0f} ms",
        first["long"] / first["short"],
        1.2,
        f"`bastion -p -c` on {messages:,} messages: start to request (median of {runs})",
    )
    print(
        f"  (fastest of {runs}, less exposed to a busy machine: {fastest['long'] * 1000:.0f} ms "
        f"vs {fastest['short'] * 1000:.0f} ms -> {fastest['long'] / fastest['short']:.2f}x)"
    )
    if not peaks["long"] or not peaks["short"]:
        print("  peak RSS: not measured (needs /usr/bin/time)")
        return
    rss = {k: statistics.median(v) for k, v in peaks.items()}
    row(
        "peak RSS (/usr/bin/time)",
        f"{rss['long'] / 1024:.1f} MB",
        f"{rss['short'] / 1024:.1f} MB",
        rss["long"] / rss["short"],
        1.5,
        f"`bastion -p -c` on {messages:,} messages: peak RSS",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=300)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument(
        "--chunks", default="20,40,80", help="characters per checkpoint, one size row each"
    )
    parser.add_argument("--streams", type=int, default=10, help="answers at once (timer)")
    parser.add_argument(
        "--per-conversation", type=int, default=100, help="turns per conversation (row 2)"
    )
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=1000, help="sessions (row 4)")
    parser.add_argument("--entries", type=int, default=100, help="entries a session (row 4)")
    parser.add_argument("--only", default="checkpoint,size,continue,search")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bastion-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        if "checkpoint" in only:
            asyncio.run(bench_checkpoint(tmp, args.checkpoints))
        if "size" in only:
            for chunk in map(int, args.chunks.split(",")):
                asyncio.run(bench_size(tmp, args.turns, chunk, args.per_conversation))
            asyncio.run(bench_timer(tmp, [200, 400, 800], args.streams))
        if "continue" in only:
            bench_continue(tmp, args.messages, args.runs)
        if "search" in only:
            asyncio.run(bench_search(tmp, args.sessions, args.entries, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
