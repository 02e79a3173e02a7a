"""The long-session row of bench_live.py: 2,000 turns with tool calls against 20.

A session is built in the store the app opens: its first turns are real runs (the
harness, a scripted provider asking for `read_file`, the workspace's tools), and
the rest are written in batches with the store's own transaction mutations
(`Tx.insert_inbox`, `insert_run`, `add_entry`, `insert_tool_call`: the rows and
ledger events a run leaves), since driving thousands of turns rebuilds the whole
context each time (quadratic). Each turn: a question, an answer that reads a file,
the read's result, and a markdown answer with a code block.

In the app (tmux, a fresh process each round), one after another:
- open: `bastion -r ID` to a ready prompt with the last answer on screen;
- top: Ctrl+Home, until the first question is on screen (the transcript mounts a
  window at the first turn and unmounts the rest: issue 36; this row held PageUp
  before there was a key for it), for TOP_CAP seconds at most: past that the row
  says which turn it reached and its time is a lower bound;
- search: the app has no search inside the transcript; what it has is `/resume`'s
  picker, which searches every session's text as you type (`Harness.search`): a word
  from the session's third turn, to its snippet on screen;
- resume: Enter on that hit (the session goes on in the app), then a prompt sent, to
  its answer on screen (timed from the prompt).
Each step's time and the RSS of the app and its processes after it, medians of the
rounds, against the same on the 20-turn session.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from pathlib import Path

from bench_app import BASTION, SIZE, canned_answer, environment, fresh, terminal
from rows import record
from terminal import rss_mib, wait_idle

from runtime.testing.process import LoopbackProcess

LONG, SHORT = 2000, 20
REAL_TURNS = 2
RESUMED = "RESUMED ANSWER"
STEPS = ("open", "top", "search", "resume")
TOP_CAP = 90.0  # seconds of PageUp at most


def question(i: int) -> str:
    return "FIRST QUESTION 0" if i == 0 else f"question {i}: what does needle{i:04d} do?"


def last_answer(turns: int) -> str:
    return f"LAST ANSWER {turns}"


def answer(i: int, turns: int) -> str:
    return last_answer(turns) if i == turns - 1 else canned_answer(i)


def read_args(i: int) -> str:
    return json.dumps({"path": f"notes{i % 10}.txt"})


async def build_session(home: Path, cwd: Path, turns: int) -> str:
    """A conversation of `turns` turns with a tool call each in `home`'s store."""
    from runtime import Harness
    from runtime.model.llm import ToolCall
    from runtime.run.toolbox import WorkspaceToolbox
    from runtime.testing.scripted import ScriptedProvider, ScriptedTurn

    for n in range(10):
        (cwd / f"notes{n}.txt").write_text(f"notes {n}\n" + "a line of notes\n" * 20)
    scripted = []
    for i in range(REAL_TURNS):
        scripted.append(ScriptedTurn(text=f"Reading notes for {i}.",
                                     tool_calls=(ToolCall(f"c{i}", "read_file", read_args(i)),)))  # fmt: skip
        scripted.append(ScriptedTurn(text=answer(i, turns)))
    provider = ScriptedProvider(scripted)
    harness = await Harness.open(
        home / "bastion.sqlite",
        resolve_model=lambda s: (provider, "b"),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, home / "artifacts"),
    )
    try:
        conv = await harness.create_conversation(str(cwd), settings={"model": "openai/bench"})
        await harness.drive(conv.id)
        for i in range(REAL_TURNS):
            item = await harness.submit(conv.id, question(i))
            await harness.wait(item.id, conv.id, poll=0.05)
        view = await harness.snapshot(conv.id)
        result = next(e for e in reversed(view.settled) if e.kind == "tool_result")
        await harness.release(conv.id)
        for start in range(REAL_TURNS, turns, 100):
            stop = min(turns, start + 100)
            await harness.store.transact(
                conv.id, lambda tx, a=start, b=stop: _seed(tx, conv.id, a, b, turns, result.text)
            )
        return conv.id
    finally:
        await harness.close()


def _seed(tx: object, conv_id: str, first: int, last: int, turns: int, result: str) -> None:
    """Turns `first`..`last` as a run leaves them: its inbox item, the run, the question,
    the answer with its call, the call's record and result, and the closing answer."""
    from runtime.model.ids import uuid7
    from runtime.model.records import Entry, InboxItem, Run, ToolCallRecord

    for i in range(first, last):
        now = time.time()
        item_id, run_id, user_id, asked_id, result_id, answer_id, call_id = (
            uuid7() for _ in range(7)
        )
        args = read_args(i)
        tx.insert_inbox(InboxItem(item_id, conv_id, "prompt", question(i), "placed", now,  # type: ignore[attr-defined]
                                  run_id=run_id, entry_id=user_id))  # fmt: skip
        tx.insert_run(Run(run_id, conv_id, item_id, "completed", now, now, revision=3,  # type: ignore[attr-defined]
                          reason="answered", result_entry_id=answer_id))  # fmt: skip
        call = {"key": call_id, "id": f"c{i}", "name": "read_file", "arguments": args}
        entries = (
            Entry(user_id, conv_id, 0, "user", "complete", question(i), now, run_id,
                  {"inbox_id": item_id}),
            Entry(asked_id, conv_id, 0, "assistant", "complete", f"Reading notes for {i}.",
                  now, run_id, {"tool_calls": [call]}),
            Entry(result_id, conv_id, 0, "tool_result", "complete", result, now, run_id,
                  {"tool_call_id": call_id, "provider_id": f"c{i}", "name": "read_file",
                   "ok": True, "images": []}),
            Entry(answer_id, conv_id, 0, "assistant", "complete", answer(i, turns), now, run_id),
        )  # fmt: skip
        for entry in entries[:2]:
            tx.add_entry(entry)  # type: ignore[attr-defined]
        tx.insert_tool_call(ToolCallRecord(call_id, conv_id, run_id, asked_id, 0, "read_file",  # type: ignore[attr-defined]
            args, True, "not_required", "done", now, now, result={"ok": True},
            result_entry_id=result_id, provider_id=f"c{i}"))  # fmt: skip
        for entry in entries[2:]:
            tx.add_entry(entry)  # type: ignore[attr-defined]


def _step(term: object, pid: int, check: object, what: str, timeout: float) -> tuple[float, float]:
    """From now to `check(screen)`: (seconds, RSS in MiB once the app is idle again)."""
    start = time.monotonic()
    seen, _ = term.wait_for(check, what, timeout, poll=0.02)  # type: ignore[attr-defined]
    wait_idle(pid, timeout=300)
    return seen - start, rss_mib(pid)


def _to_top(term: object, pid: int) -> tuple[float, float, int]:
    """Ctrl+Home, until the first question is on screen, for TOP_CAP seconds at most:
    (seconds, RSS in MiB once idle, the turn on screen when it stopped: 0 at the top)."""
    first = question(0)
    start = time.monotonic()
    term.send("C-Home")  # type: ignore[attr-defined]
    while first not in (screen := term.screen()):  # type: ignore[attr-defined]
        if time.monotonic() - start > TOP_CAP:
            break
        time.sleep(0.02)  # poll the screen until the first turn is drawn
    seen = time.monotonic()
    turns = [int(n) for n in re.findall(r"question (\d+):", screen)]
    wait_idle(pid, timeout=300)
    return seen - start, rss_mib(pid), 0 if first in screen else min(turns, default=-1)


Figures = dict[str, tuple[float, float]]


def round_once(base: Path, run: Path, conv_id: str, turns: int) -> tuple[Figures, int]:
    """The four steps on the session in `run`, in one app: ({step: (seconds, RSS MiB)},
    the turn PageUp had reached when its time ran out, 0 if at the top)."""
    found: Figures = {}
    word = "needle0003"
    turn = [{"text": RESUMED, "repeat": True}]
    with LoopbackProcess.start(turn, fresh(base, "server")) as server, terminal(run) as term:
        env = environment(run / "home", server)
        start = term.start([BASTION, "-r", conv_id], env, run / "work", SIZE)
        pid = term.app_pid()
        ready, _ = term.wait_for(
            lambda s: last_answer(turns) in s and "Ask Bastion" in s, "the session's end", 300
        )
        wait_idle(pid, timeout=300)
        found["open"] = (ready - start, rss_mib(pid))
        seconds, rss, reached = _to_top(term, pid)
        found["top"] = (seconds, rss)
        term.send("/resume", literal=True)
        term.send("Enter")
        term.wait_for(lambda s: "filter or search" in s, "the session picker", 60)
        term.send(word, literal=True)
        found["search"] = _step(term, pid, lambda s: s.count(word) >= 2, "the snippet", 120)
        term.send("Enter")  # the session found: it goes on here (as it was)
        term.wait_for(lambda s: "filter or search" not in s and last_answer(turns) in s,
                      "the session again", 300)  # fmt: skip
        wait_idle(pid, timeout=300)
        term.send("go on from here", literal=True)
        term.send("Enter")
        found["resume"] = _step(term, pid, lambda s: RESUMED in s, "the resumed answer", 600)
    return found, reached


def bench_long(base: Path, runs: int) -> None:
    sessions = {}
    for turns in (SHORT, LONG):
        run = fresh(base, f"long{turns}")
        built = time.perf_counter()
        conv_id = asyncio.run(build_session(run / "home", run / "work", turns))
        sessions[turns] = (run, conv_id, time.perf_counter() - built)
    figures: dict[int, list[Figures]] = {SHORT: [], LONG: []}
    reached: dict[int, list[int]] = {SHORT: [], LONG: []}
    for _ in range(max(1, runs - 1)):
        for turns, (run, conv_id, _) in sessions.items():
            found, turn = round_once(base, run, conv_id, turns)
            figures[turns].append(found)
            reached[turns].append(turn)
    print(f"  sessions built in {sessions[SHORT][2]:.0f} s and {sessions[LONG][2]:.0f} s")
    for step in STEPS:
        _long_row(step, figures, max(reached[LONG]) if step == "top" else 0)


def _long_row(step: str, figures: dict[int, list[Figures]], reached: int) -> None:
    """One step's row: medians of the rounds, the long session against the short one.
    `reached`: the turn PageUp got to in TOP_CAP seconds when it did not reach the top."""
    ours = statistics.median(f[step][0] for f in figures[LONG])
    ref = statistics.median(f[step][0] for f in figures[SHORT])
    rss = statistics.median(f[step][1] for f in figures[LONG])
    ref_rss = statistics.median(f[step][1] for f in figures[SHORT])
    shown = f"{ours:.2f} s"
    if reached:
        shown = f"> {TOP_CAP:.0f} s (stopped at turn {reached} of {LONG})"
    print(
        f"  {LONG}-turn session (tool calls), {step}: {shown}, {rss:.0f} MiB | "
        f"{SHORT} turns: {ref:.2f} s, {ref_rss:.0f} MiB | {ours / ref:.2f}x time"
        f"{' at least' if reached else ''}, {rss / ref_rss:.2f}x RSS",
        flush=True,
    )
    record(
        f"{LONG}-turn session with tool calls: {step} (time; RSS after)",
        f"{shown}, {rss:.0f} MiB",
        f"{SHORT} turns: {ref:.2f} s, {ref_rss:.0f} MiB",
        ours / ref,
        None,
        note=f"RSS {rss / ref_rss:.2f}x" + (" (time: a lower bound)" if reached else ""),
    )
