"""The OpenAI Responses wire format for the loopback server's `/v1/responses` route.

The same scripted turns as the chat route, streamed as the Responses API does:
`response.created` and `response.in_progress`, then per output item
`response.output_item.added`, its deltas (`response.reasoning_summary_text.delta`,
`response.output_text.delta`, `response.function_call_arguments.delta`) and
their `.done` events, `response.output_item.done`, and finally
`response.completed` with the usage (or `response.incomplete` with reason
`max_output_tokens` for a turn whose finish reason is "length"). Every event
carries a `sequence_number`; there is no `[DONE]`. A fault's chunk count
counts deltas; an item's opening and closing events travel with its first and
last delta. A mid-stream fault sends an `error` event, or the fault's body as it
is when that body is an event itself (a recorded `response.failed`, say).

A turn's `usage` may give `input_tokens`/`prompt_tokens`, `cached_tokens`,
`output_tokens`/`completion_tokens` and `reasoning_tokens`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from runtime.testing.turns import LoopbackTurn, RenderedStream, usage_for

__all__ = ["error_event", "render_responses_stream", "response_body"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def error_event(body: Any) -> bytes:
    """The event a mid-stream fault sends.

    A fault body that is itself an event (an object with a string `type`, such as
    `{"type": "response.failed", "response": {...}}` or an `error` event with a
    nested `error` object) is sent as it is, so a test can replay what the API
    was recorded sending. Any other body becomes an `error` event with the error
    object's fields at the top level, as the API reference documents it.
    """
    if isinstance(body, Mapping) and isinstance(body.get("type"), str):
        return f"event: {body['type']}\ndata: {_dumps(dict(body))}\n\n".encode()
    error = body.get("error") if isinstance(body, Mapping) else None
    fields = dict(error) if isinstance(error, Mapping) else {"message": str(body)}
    payload = {
        "type": "error",
        "code": fields.get("code") or fields.get("type"),
        "message": fields.get("message"),
        "param": fields.get("param"),
    }
    return f"event: error\ndata: {_dumps(payload)}\n\n".encode()


class _Events:
    """Numbers events in the order they are rendered."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, kind: str, **data: Any) -> str:
        payload = {"type": kind, "sequence_number": self.seq, **data}
        self.seq += 1
        return f"event: {kind}\ndata: {_dumps(payload)}\n\n"


def _usage(turn: LoopbackTurn, body: Mapping[str, Any]) -> dict[str, Any]:
    usage = usage_for(turn, {"messages": body.get("input", [])})
    inputs = int(usage.get("input_tokens", usage["prompt_tokens"]))
    outputs = int(usage.get("output_tokens", usage["completion_tokens"]))
    return {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))},
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": int(usage.get("reasoning_tokens", 0))},
        "total_tokens": inputs + outputs,
    }


def _output(turn: LoopbackTurn, serial: int) -> list[dict[str, Any]]:
    """The response's output items, complete (as `response.completed` lists them)."""
    items: list[dict[str, Any]] = []
    if turn.reasoning:
        summary = [{"type": "summary_text", "text": turn.reasoning}]
        items.append({"type": "reasoning", "id": f"rs_{serial}", "summary": summary})
    if turn.text:
        content = [{"type": "output_text", "text": turn.text, "annotations": []}]
        items.append(
            {
                "type": "message",
                "id": f"msg_{serial}",
                "status": "completed",
                "role": "assistant",
                "content": content,
            }
        )
    for n, call in enumerate(turn.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{serial}_{n}",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return items


def _response(
    turn: LoopbackTurn, body: Mapping[str, Any], serial: int, *, status: str, done: bool
) -> dict[str, Any]:
    model = body.get("model") if isinstance(body.get("model"), str) else "loopback"
    response: dict[str, Any] = {
        "id": f"resp_loopback_{serial}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": _output(turn, serial) if done else [],
        "error": None,
        "incomplete_details": None,
        "usage": _usage(turn, body) if done else None,
    }
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return response


def _item(head: list[str], deltas: list[str], tail: list[str]) -> list[str]:
    """One output item as counted chunks; its opening and closing ride on the first and last."""
    chunks = deltas or [""]
    chunks[0] = "".join(head) + chunks[0]
    chunks[-1] += "".join(tail)
    return chunks


Pieces = Callable[[str], list[str]]
Rendered = tuple[list[str], list[str], list[str]]  # opening events, deltas, closing events


def _reasoning_item(ev: _Events, index: int, item: dict[str, Any], pieces: Pieces) -> Rendered:
    at = {"output_index": index, "item_id": item["id"], "summary_index": 0}
    part: dict[str, Any] = {"type": "summary_text", "text": ""}
    text = item["summary"][0]["text"]
    start = [
        ev("response.output_item.added", output_index=index, item={**item, "summary": []}),
        ev("response.reasoning_summary_part.added", **at, part=part),
    ]
    deltas = [ev("response.reasoning_summary_text.delta", **at, delta=p) for p in pieces(text)]
    end = [
        ev("response.reasoning_summary_text.done", **at, text=text),
        ev("response.reasoning_summary_part.done", **at, part={**part, "text": text}),
        ev("response.output_item.done", output_index=index, item=item),
    ]
    return start, deltas, end


def _message_item(ev: _Events, index: int, item: dict[str, Any], pieces: Pieces) -> Rendered:
    at = {"output_index": index, "item_id": item["id"], "content_index": 0}
    part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
    text = item["content"][0]["text"]
    opened = {**item, "status": "in_progress", "content": []}
    start = [
        ev("response.output_item.added", output_index=index, item=opened),
        ev("response.content_part.added", **at, part=part),
    ]
    deltas = [ev("response.output_text.delta", **at, delta=p, logprobs=[]) for p in pieces(text)]
    end = [
        ev("response.output_text.done", **at, text=text, logprobs=[]),
        ev("response.content_part.done", **at, part={**part, "text": text}),
        ev("response.output_item.done", output_index=index, item=item),
    ]
    return start, deltas, end


def _call_item(ev: _Events, index: int, item: dict[str, Any], pieces: Pieces) -> Rendered:
    at = {"output_index": index, "item_id": item["id"]}
    arguments = item["arguments"]
    opened = {**item, "status": "in_progress", "arguments": ""}
    start = [ev("response.output_item.added", output_index=index, item=opened)]
    deltas = [
        ev("response.function_call_arguments.delta", **at, delta=p) for p in pieces(arguments)
    ]
    end = [
        ev("response.function_call_arguments.done", **at, arguments=arguments),
        ev("response.output_item.done", output_index=index, item=item),
    ]
    return start, deltas, end


_RENDER_ITEM = {"reasoning": _reasoning_item, "message": _message_item, "function_call": _call_item}


def render_responses_stream(
    turn: LoopbackTurn, body: Mapping[str, Any], *, serial: int
) -> RenderedStream:
    size = max(1, turn.chunk_size)

    def pieces(text: str) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)]

    ev = _Events()
    working = _response(turn, body, serial, status="in_progress", done=False)
    head = ev("response.created", response=working) + ev("response.in_progress", response=working)
    chunks: list[str] = []
    for index, item in enumerate(_output(turn, serial)):
        chunks.extend(_item(*_RENDER_ITEM[item["type"]](ev, index, item, pieces)))
    status = "incomplete" if turn.effective_finish_reason == "length" else "completed"
    final = _response(turn, body, serial, status=status, done=True)
    tail = ev(f"response.{status}", response=final)
    return RenderedStream(head.encode(), [c.encode() for c in chunks], tail.encode())


def response_body(turn: LoopbackTurn, body: Mapping[str, Any], *, serial: int) -> dict[str, Any]:
    """A non-streamed Responses API answer."""
    incomplete = turn.effective_finish_reason == "length"
    status = "incomplete" if incomplete else "completed"
    return _response(turn, body, serial, status=status, done=True)
