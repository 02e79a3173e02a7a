"""The Anthropic Messages wire format for the loopback server's `/v1/messages` route.

The same scripted turns as the OpenAI route, streamed as Anthropic does:
`message_start`, per block `content_block_start` / `content_block_delta`
(`thinking_delta`, `text_delta`, `input_json_delta`) / `content_block_stop`,
then `message_delta` with the stop reason and usage, and `message_stop`. A
fault's chunk count counts deltas; a block's start and stop travel with its
first and last delta.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime.testing.turns import LoopbackTurn, RenderedStream, usage_for

__all__ = ["anthropic_error", "error_event", "message_body", "render_messages_stream"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def anthropic_error(message: str, *, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_event(body: Any) -> bytes:
    return f"event: error\ndata: {_dumps(body)}\n\n".encode()


def _event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {_dumps({'type': kind, **data})}\n\n"


def _stop_reason(turn: LoopbackTurn) -> str:
    reason = turn.effective_finish_reason
    return _STOP_REASONS.get(reason, reason)


def _usage(turn: LoopbackTurn, body: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """(message_start usage, output tokens) from the turn's OpenAI-style usage."""
    usage = usage_for(turn, body)
    start = {
        "input_tokens": usage.get("input_tokens", usage["prompt_tokens"]),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        "output_tokens": 1,
    }
    return start, int(usage.get("output_tokens", usage["completion_tokens"]))


def _block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[str]:
    """One content block as counted chunks; start and stop ride on the first and last."""
    events = [_event("content_block_delta", {"index": index, "delta": d}) for d in deltas]
    if not events:
        events = [""]
    events[0] = _event("content_block_start", {"index": index, "content_block": start}) + events[0]
    events[-1] += _event("content_block_stop", {"index": index})
    return events


def render_messages_stream(
    turn: LoopbackTurn, body: Mapping[str, Any], *, serial: int
) -> RenderedStream:
    size = max(1, turn.chunk_size)

    def pieces(text: str) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)]

    start_usage, output_tokens = _usage(turn, body)
    model = body.get("model") if isinstance(body.get("model"), str) else "loopback"
    head = _event(
        "message_start",
        {
            "message": {
                "id": f"msg_loopback_{serial}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            }
        },
    )
    chunks: list[str] = []
    index = 0
    if turn.reasoning:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(turn.reasoning)]
        deltas.append({"type": "signature_delta", "signature": "loopback-signature"})
        chunks.extend(_block(index, {"type": "thinking", "thinking": ""}, deltas))
        index += 1
    if turn.text:
        deltas = [{"type": "text_delta", "text": p} for p in pieces(turn.text)]
        chunks.extend(_block(index, {"type": "text", "text": ""}, deltas))
        index += 1
    for call in turn.tool_calls:
        start = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(call.arguments)]
        chunks.extend(_block(index, start, deltas))
        index += 1
    tail = _event(
        "message_delta",
        {
            "delta": {"stop_reason": _stop_reason(turn), "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    ) + _event("message_stop", {})
    return RenderedStream(head.encode(), [c.encode() for c in chunks], tail.encode())


def message_body(turn: LoopbackTurn, body: Mapping[str, Any], *, serial: int) -> dict[str, Any]:
    """A non-streamed Messages API answer."""
    content: list[dict[str, Any]] = []
    if turn.reasoning:
        content.append({"type": "thinking", "thinking": turn.reasoning, "signature": "loopback"})
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    for call in turn.tool_calls:
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except ValueError:
            arguments = {"_raw_arguments": call.arguments}
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    start_usage, output_tokens = _usage(turn, body)
    return {
        "id": f"msg_loopback_{serial}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") if isinstance(body.get("model"), str) else "loopback",
        "content": content,
        "stop_reason": _stop_reason(turn),
        "stop_sequence": None,
        "usage": {**start_usage, "output_tokens": output_tokens},
    }
