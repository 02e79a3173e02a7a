"""Issue 25, item 1: split and lone surrogates from a model stream or an imported file.

A surrogate pair cut between two stream events is joined into its one character;
a lone surrogate becomes U+FFFD; nothing downstream ever sees a surrogate (SQLite
refuses to store one with UnicodeEncodeError, which used to fail the run).
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime import Harness
from runtime.model.llm import ReasoningChunk, StreamEnd, TextChunk, ToolCallChunk
from runtime.providers.openai import OpenAIChatProvider
from runtime.run.deps import LoopSettings
from runtime.setup.load import Config
from runtime.store.surrogates import SurrogateJoiner, mend, mend_tree, valid_stream
from runtime.testing.server import LoopbackServer
from tests.runtime.helpers import RecordingToolbox

HIGH, LOW = "\ud83d", "\ude00"  # U+1F600 as JSON spells it
SMILE = "\U0001f600"


def test_split_surrogates_mend_joins_pairs_and_replaces_lone_halves() -> None:
    assert mend("plain") == "plain"
    assert mend("a" + HIGH + LOW + "b") == "a" + SMILE + "b"
    assert mend("a\ud800b\udc00") == "a\ufffdb\ufffd"
    assert mend(LOW + HIGH) == "\ufffd\ufffd"  # the wrong order is not a pair
    assert mend_tree({"k\ud800": ["x\udfff", 3, None]}) == {"k\ufffd": ["x\ufffd", 3, None]}


def test_split_surrogates_joiner_holds_a_high_half_for_the_next_piece() -> None:
    joiner = SurrogateJoiner()
    assert joiner.feed("ok " + HIGH) == "ok "
    assert joiner.feed(LOW + " then") == SMILE + " then"
    assert joiner.feed(HIGH) == ""
    assert joiner.feed("x") == "\ufffdx"  # no partner came: replaced
    assert joiner.feed(HIGH) == "" and joiner.flush() == "\ufffd" and joiner.flush() == ""


async def test_split_surrogates_valid_stream_keeps_channels_apart() -> None:
    async def items():  # type: ignore[no-untyped-def]
        yield TextChunk("a" + HIGH)
        yield ReasoningChunk(LOW)  # another channel: not the text's partner
        yield ToolCallChunk(0, "id\udc00", "na\ud800me", '{"p": "' + HIGH)
        yield ToolCallChunk(0, arguments=LOW + '"}')
        yield TextChunk(LOW)
        yield TextChunk("z" + HIGH)
        yield StreamEnd("stop")

    out = [item async for item in valid_stream(items())]
    assert out == [
        TextChunk("a"),
        ReasoningChunk("\ufffd"),
        ToolCallChunk(0, "id\ufffd", "na\ufffdme", '{"p": "'),
        ToolCallChunk(0, None, None, SMILE + '"}'),
        TextChunk(SMILE),
        TextChunk("z"),
        TextChunk("\ufffd"),  # released before the end
        StreamEnd("stop"),
    ]


async def test_split_surrogates_from_a_real_stream_complete_the_run(tmp_path: Path) -> None:
    """One UTF-16 unit per event, over the wire: text, tool name, call id and arguments."""
    arguments = json.dumps({"path": "a" + HIGH + LOW}, ensure_ascii=False)
    turns = [
        {
            "text": "smile " + HIGH + LOW + " lone \udc00 end",
            "chunk_size": 1,
            "tool_calls": [{"id": "call_\ud800", "name": "read_file", "arguments": arguments}],
        },
        {"text": "done " + HIGH, "chunk_size": 1},
    ]
    toolbox = RecordingToolbox()
    async with LoopbackServer(turns) as server:
        provider = OpenAIChatProvider("openai", server.base_url)
        harness = await Harness.open(
            tmp_path / "b.sqlite",
            resolve_model=lambda s: (provider, s.split("/", 1)[1]),
            toolbox_factory=lambda conv: toolbox,
            loop_settings=LoopSettings(checkpoint_interval=0.02, backoff_base=0.01),
            config=Config(),
        )
        try:
            conv = await harness.create_conversation(str(tmp_path), settings={"model": "openai/m"})
            await harness.drive(conv.id, approval_mode="full-auto")
            item = await harness.submit(conv.id, "go")
            run = await harness.wait(item.id, conv.id)
            view = await harness.snapshot(conv.id)
        finally:
            await harness.close()
            await provider.aclose()
        sent = server.requests[1].body["messages"]
    assert run.state == "completed", run.error
    texts = [e.text for e in view.entries if e.kind == "assistant"]
    assert texts == ["smile " + SMILE + " lone \ufffd end", "done \ufffd"]
    assert toolbox.calls == [("read_file", {"path": "a" + SMILE})]
    (call,) = view.tool_calls
    assert call.name == "read_file"
    assert sent[2]["tool_calls"][0]["id"] == "call_\ufffd"  # the id, mended, went back


async def test_split_surrogates_in_an_imported_file_become_replacement_characters(
    tmp_path: Path,
) -> None:
    harness = await Harness.open(tmp_path / "b.sqlite", config=Config())
    try:
        conv = await harness.create_conversation(str(tmp_path), settings={"model": "openai/m"})
        document = await harness.export(conv.id)
        document["conversation"]["title"] = "t\ud800"
        document["entries"] = [
            {
                "id": "0192f7a4-6c1e-7d2a-9b3e-5f6a7b8c9d0e",
                "conversation_id": conv.id,
                "position": 0,
                "kind": "user",
                "status": "complete",
                "text": "hi \ud800 " + HIGH + LOW,
                "created_at": 1.0,
                "data": {},
            }
        ]
        text = json.dumps(document)  # ensure_ascii: the file spells them `\\ud800`
        assert "\\ud800" in text
        imported = await harness.import_conversation(text, cwd=str(tmp_path))
        view = await harness.snapshot(imported.id)
    finally:
        await harness.close()
    assert imported.title == "t\ufffd"
    assert [e.text for e in view.entries] == ["hi \ufffd " + SMILE]
