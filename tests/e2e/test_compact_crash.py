"""`bastion compact` killed mid-compaction leaves the conversation as it was; done again it
commits one summary, whose ledger events replay through the reducer, and the next
request sends the summary in place of the compacted turn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from runtime import ConversationView, Harness, reduce
from tests.e2e.test_crash_matrix import run_bastion

pytestmark = pytest.mark.e2e


def state(home: Path, conv_id: str) -> tuple[int, list[tuple[str, str, str]], int]:
    db = sqlite3.connect(home / "bastion.sqlite")
    try:
        version = db.execute("SELECT version FROM conversations WHERE id = ?", (conv_id,))
        entries = db.execute(
            "SELECT id, kind, text FROM entries WHERE conversation_id = ? ORDER BY position",
            (conv_id,),
        ).fetchall()
        ledger = db.execute("SELECT count(*) FROM ledger WHERE conversation_id = ?", (conv_id,))
        return version.fetchone()[0], entries, ledger.fetchone()[0]
    finally:
        db.close()


async def replayed(home: Path, conv_id: str) -> tuple[ConversationView, ConversationView]:
    harness = await Harness.open(home / "bastion.sqlite")
    try:
        snap = await harness.snapshot(conv_id)
        view = ConversationView(conversation=snap.conversation, version=0)
        for event in await harness.ledger(conv_id):
            view = reduce(view, event)
        return snap, view
    finally:
        await harness.close()


@pytest.mark.parametrize("point", ["compact.summarised", "compact.committed"])
def test_sigkill_mid_compaction(loopback, bastion, point: str) -> None:
    server = loopback(
        [
            {"text": "first answer"},
            {"text": "second answer"},
            {"text": "SUMMARY ONE"},
            {"text": "SUMMARY TWO"},
            {"text": "third answer"},
        ]
    )
    b = bastion(server)
    first = b.json("-p", "FIRST PROMPT", "--output-format", "json")
    conv_id = first["session_id"]
    assert b.run("-p", "-c", "SECOND PROMPT").returncode == 0
    before = state(b.home, conv_id)

    killed = run_bastion(b, "compact", conv_id, failpoint=point)
    assert killed.returncode == -9, killed.stderr
    after_kill = state(b.home, conv_id)
    if point == "compact.summarised":
        assert after_kill == before  # nothing of the compaction was written
        done = run_bastion(b, "compact", conv_id, failpoint=None)
        assert done.returncode == 0, done.stderr
        assert "compacted 2 entries" in done.stderr
        summary_text = "SUMMARY TWO"
    else:
        summary_text = "SUMMARY ONE"  # committed before the kill: kept, whole
    version, entries, _ = state(b.home, conv_id)
    assert entries[: len(before[1])] == before[1]  # every original kept, unchanged
    summaries = [e for e in entries if e[1] == "summary"]
    assert [s[2] for s in summaries] == [summary_text]

    snap, view = asyncio.run(replayed(b.home, conv_id))
    assert view.version == version == snap.version
    assert [(e.id, e.kind, e.text, e.data) for e in view.entries] == [
        (e.id, e.kind, e.text, e.data) for e in snap.entries
    ]

    exported = json.loads(b.run("export", conv_id).stdout)["entries"]
    assert [e["compacted"] for e in exported] == [True, True, False, False, False]

    if point == "compact.committed":
        return
    third = b.run("-p", "-c", "THIRD PROMPT")
    assert third.returncode == 0, third.stderr
    sent = json.dumps(server.requests()[-1]["messages"])
    assert "SUMMARY TWO" in sent and "FIRST PROMPT" not in sent and "SECOND PROMPT" in sent


def test_sigkill_mid_automatic_compaction_then_resume(loopback, bastion) -> None:
    """A print run that must compact first is killed after the summary was written but
    before it was committed: the resume compacts again and answers."""
    server = loopback(
        [
            {"text": "first answer"},
            {"text": "SUMMARY LOST"},  # written, never committed (killed)
            {"text": "SUMMARY KEPT"},
            {"text": "second answer"},
        ]
    )
    b = bastion(server)
    config = Path(b.env["XDG_CONFIG_HOME"]) / "bastion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[models."openai/test-model"]\ncontext_window = 4000\n')
    words = "word " * 1200
    first = b.json("-p", "FIRST " + words, "--output-format", "json")
    conv_id = first["session_id"]
    killed = run_bastion(b, "-p", "-c", "SECOND " + words, failpoint="compact.summarised")
    assert killed.returncode == -9, killed.stderr
    _, entries, _ = state(b.home, conv_id)
    assert not [e for e in entries if e[1] == "summary"]
    resumed = run_bastion(b, "-p", "--resume", conv_id, "--output-format", "json", failpoint=None)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["result"] == "second answer"
    _, entries, _ = state(b.home, conv_id)
    assert [e[2] for e in entries if e[1] == "summary"] == ["SUMMARY KEPT"]
    sent = json.dumps(server.requests()[-1]["messages"])
    assert "SUMMARY KEPT" in sent and "FIRST" not in sent and "SECOND" in sent


WORDS = 3000  # the next run's requests pass BACKGROUND_AT of an 8,000-token window, not all of it
SUMMARY_ASK = "Write the summary of the session above."  # (the summary request's last line)


def test_sigkill_mid_background_compaction_then_resume(loopback, bastion) -> None:
    """A run past BACKGROUND_AT of the budget summarises in the background while it goes
    on; killed after the summary was written and before it was committed, it leaves no
    summary, and the resumed run answers without running its tool again."""
    server = loopback(
        [
            {"text": "first answer"},
            {"text": "Reading.", "tool_calls": [
                {"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
            {"match": SUMMARY_ASK, "text": "SUMMARY LOST"},  # written, never committed
            # the run's next request, streamed slowly while the summary is written (or,
            # if the kill came first, the resumed run's): either way the answer
            {"text": "second answer", "chunk_size": 2, "delay_ms": 100},
            {"text": "second answer"},
        ]
    )  # fmt: skip
    b = bastion(server)
    (b.cwd / "a.txt").write_text("hello\n")
    config = Path(b.env["XDG_CONFIG_HOME"]) / "bastion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[models."openai/test-model"]\ncontext_window = 8000\n')
    first = b.json("-p", "FIRST " + "word " * WORDS, "--output-format", "json")
    conv_id = first["session_id"]
    killed = run_bastion(b, "-p", "-c", "SECOND", failpoint="compact.summarised")
    assert killed.returncode == -9, killed.stderr
    asked = [SUMMARY_ASK in json.dumps(r["messages"]) for r in server.requests()]
    assert asked.count(True) == 1
    # in the background: after the run's first request (a summary that must come first
    # would have been asked for before it)
    assert asked.index(True) >= 2, asked
    _, entries, _ = state(b.home, conv_id)
    assert not [e for e in entries if e[1] == "summary"]
    resumed = run_bastion(b, "-p", "--resume", conv_id, "--output-format", "json", failpoint=None)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout.strip().splitlines()[-1])["result"]
    assert result == "second answer"
    _, entries, _ = state(b.home, conv_id)
    assert not [e for e in entries if e[1] == "summary"]
    assert len([e for e in entries if e[1] == "tool_result"]) == 1  # the read ran once
