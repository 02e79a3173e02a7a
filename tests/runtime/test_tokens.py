"""Token counts say how they were had: measured, estimated with tiktoken, or unavailable."""

from __future__ import annotations

from runtime import tokens
from runtime.providers.base import Message, StreamEnd, TextChunk, ToolCall
from runtime.tokens import Quality, count_messages, count_text
from tests.runtime.helpers import open_harness


def test_count_text_is_an_offline_tiktoken_estimate():
    count = count_text("hello world")
    assert count == tokens.TokenCount(2, Quality.ESTIMATED)


def test_count_messages_adds_the_chat_overhead():
    one = count_messages([Message("user", "hello world")])
    assert one.quality is Quality.ESTIMATED and one.tokens == 3 + 3 + 2
    with_call = count_messages(
        [Message("assistant", "", tool_calls=(ToolCall("c", "read_file", '{"path": "a"}'),))]
    )
    assert with_call.tokens > one.tokens - 2


def test_unavailable_when_no_encoding_can_be_had(monkeypatch):
    monkeypatch.setattr(tokens, "_tried", True)
    monkeypatch.setattr(tokens, "_encoding", None)
    assert count_text("x") == tokens.TokenCount(None, Quality.UNAVAILABLE)


class SilentProvider:
    """A provider that, like some local servers, never reports usage."""

    name = "silent"

    def __init__(self):
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        yield TextChunk("four score and seven years ago")
        yield StreamEnd("stop")

    async def aclose(self):
        pass


async def test_run_without_provider_usage_records_an_estimate(tmp_path):
    harness = await open_harness(tmp_path, SilentProvider())
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "recite")
    run = await harness.wait(item.id, conv.id)
    assert run.usage["quality"] == "estimated"
    assert run.usage["output_tokens"] == count_text("four score and seven years ago").tokens
    assert run.usage["input_tokens"] > 10
    await harness.close()


async def test_measured_usage_is_marked_measured(tmp_path):
    from runtime.providers.base import Usage
    from runtime.testing.scripted import ScriptedProvider, ScriptedTurn

    harness = await open_harness(
        tmp_path, ScriptedProvider([ScriptedTurn(text="x", usage=Usage(5, 1))])
    )
    conv = await harness.create_conversation(str(tmp_path), settings={"model": "s/m"})
    await harness.drive(conv.id)
    item = await harness.submit(conv.id, "q")
    run = await harness.wait(item.id, conv.id)
    assert run.usage["quality"] == "measured" and run.usage["input_tokens"] == 5
    await harness.close()
