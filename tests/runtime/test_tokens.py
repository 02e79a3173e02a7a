"""Token counts say how they were had: measured, estimated with tiktoken, or unavailable."""

from __future__ import annotations

import math

from runtime.context import tokens
from runtime.context.tokens import count_messages, count_text
from runtime.model.llm import Message, StreamEnd, TextChunk, ToolCall
from runtime.model.results import Quality
from tests.runtime.helpers import open_harness


def test_count_text_is_an_offline_tiktoken_estimate():
    count = count_text("hello world")
    assert count == tokens.TokenCount(2, Quality.ESTIMATED)


def test_count_messages_adds_the_chat_overhead():
    one = count_messages([Message("user", "hello world")])
    # the reply's priming, the message's framing and role, its text
    assert one.quality is Quality.ESTIMATED and one.tokens == 3 + (3 + 1) + 2
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
    from runtime.model.llm import Usage
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


def test_a_request_counts_its_tool_definitions_as_sent():
    from runtime.model.llm import ModelRequest, ToolSpec

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    short = ToolSpec("read_file", "Read a file.", schema)
    long = ToolSpec("read_file", "Read a file. " * 50, schema)
    message = (Message("user", "hello world"),)
    bare = tokens.count_request(ModelRequest("gpt-4o", message)).tokens
    with_short = tokens.count_request(ModelRequest("gpt-4o", message, (short,))).tokens
    with_long = tokens.count_request(ModelRequest("gpt-4o", message, (long,))).tokens
    assert bare == count_messages(message).tokens  # no correction for an OpenAI model
    assert bare is not None and with_short is not None and with_long is not None
    assert with_short > bare + 10  # name, description and schema
    assert with_long - with_short >= 49 * 3  # the description counts, not just the schema


def test_claude_estimates_are_corrected_for_its_tokenizer_and_tool_prompt():
    from runtime.model.llm import ModelRequest, ToolSpec

    messages = (Message("system", "You are terse."), Message("user", "word " * 1000))
    base = count_messages(messages).tokens
    assert base is not None
    claude = tokens.count_request(ModelRequest("claude-sonnet-4-5", messages)).tokens
    assert claude == math.ceil(base * tokens.CLAUDE_FACTOR)
    # the same model through an OpenAI-compatible gateway is still Claude's tokenizer
    routed = tokens.count_request(ModelRequest("anthropic/claude-3.5-sonnet", messages)).tokens
    assert routed == claude
    tool = ToolSpec("glob", "Find files.", {"type": "object", "properties": {}})
    defs = tokens.count_tools([tool]).tokens
    assert defs is not None
    with_tools = tokens.count_request(ModelRequest("claude-sonnet-4-5", messages, (tool,))).tokens
    expected = math.ceil((base + defs) * tokens.CLAUDE_FACTOR) + tokens.CLAUDE_TOOL_PROMPT
    assert with_tools == expected


def test_compaction_threshold_uses_the_corrected_estimate():
    from runtime.context.compaction import exceeds
    from runtime.model.llm import ModelRequest

    messages = (Message("user", "word " * 1000),)
    base = count_messages(messages).tokens
    assert base is not None
    budget = base + 50  # fits as cl100k counts it, not as Claude's tokenizer would
    assert not exceeds(ModelRequest("gpt-4o", messages), budget)
    assert exceeds(ModelRequest("claude-sonnet-4-5", messages), budget)


def test_long_texts_are_counted_once_and_the_memory_is_bounded(monkeypatch):
    enc = tokens.encoding()
    texts = [f"text {i} " + "lorem ipsum dolor sit amet " * 20 for i in range(6)]
    exact = [len(enc.encode(t)) for t in texts]
    tokens.clear_cache()
    monkeypatch.setattr(tokens, "CACHE_MAX_CHARS", len(texts[0]) * 3)
    assert [count_text(t).tokens for t in texts] == exact
    # the newest three are remembered, the older ones were let go
    assert list(tokens._cache) == texts[3:]
    assert tokens._cache_chars <= tokens.CACHE_MAX_CHARS
    copies = [t[:1] + t[1:] for t in texts]  # equal text, other objects
    assert [count_text(t).tokens for t in copies] == exact
    one = count_messages([Message("user", texts[0]), Message("assistant", texts[1])])
    tokens.clear_cache()
    assert not tokens._cache and tokens._cache_chars == 0
    assert count_messages([Message("user", texts[0]), Message("assistant", texts[1])]) == one
    short = "short text"
    count_text(short)
    assert short not in tokens._cache  # below CACHE_MIN_CHARS: encoded each time


def test_huge_tool_argument_token_estimate_stays_linear_and_cheap():
    """Issue 25, item 12: BPE's cost grows faster than the length of a run with no
    space in it; a 10 MB tool argument used to stall the next request for seconds to
    minutes. Long texts are counted in pieces, very long ones from samples."""
    import random
    import string
    import time

    enc = tokens.encoding()
    tokens.clear_cache()
    random.seed(25)
    words = (
        "".join(random.choices(string.ascii_lowercase, k=random.randint(2, 9)))
        for _ in range(300_000)
    )
    prose = " ".join(words)  # about 1.8 MB
    middle = prose[:600_000]  # counted in pieces: all of it
    exact = len(enc.encode(middle, disallowed_special=()))
    assert exact <= count_text(middle).tokens <= exact * 1.001
    exact = len(enc.encode(prose, disallowed_special=()))
    assert abs(count_text(prose).tokens - exact) <= exact * 0.02  # sampled
    huge = '{"path": "x", "content": "' + "ab" * 5_000_000 + '"}'  # 10 MB, one run
    started = time.process_time()  # CPU time: a loaded machine does not stretch it
    counted = count_messages([Message("assistant", "", (ToolCall("c", "write_file", huge),))])
    took = time.process_time() - started
    assert counted.tokens is not None and 4_900_000 <= counted.tokens <= 5_100_000
    assert took < 3.0, f"counting a 10 MB argument took {took:.1f} s"
