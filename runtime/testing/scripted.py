"""A scripted `Provider` for unit tests: replays turns, records requests.

    read = ToolCall("c1", "read_file", '{"path": "a"}')
    provider = ScriptedProvider([
        ScriptedTurn(text="Let me look.", tool_calls=(read,)),
        ScriptedTurn(text="Done."),
    ])
    ...
    assert provider.requests[1].messages[-1].role == "tool"

Each `stream()` call consumes the next turn. A turn yields reasoning, then
text, then tool calls, each cut into `chunk_size` pieces (one item per piece,
no coalescing), then a `UsageReport` and a `StreamEnd`. `error` is raised
after `error_after_chunks` items (0: before anything). With no turn left the
provider raises ProviderError(code="script_exhausted").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from runtime.model.llm import (
    ModelRequest,
    ProviderError,
    ReasoningChunk,
    StreamEnd,
    StreamItem,
    TextChunk,
    ToolCall,
    ToolCallChunk,
    Usage,
    UsageReport,
)

__all__ = ["ScriptedProvider", "ScriptedTurn"]


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One model response, replayed by `ScriptedProvider`.

    `chunk_size=None` sends each part whole. `usage=None` reports a small
    deterministic estimate (4 characters a token); `finish_reason=None` means
    "tool_calls" when there are tool calls and "stop" otherwise. `delay` is
    seconds slept before each chunk.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    error: ProviderError | None = None
    error_after_chunks: int = 0
    chunk_size: int | None = None
    delay: float = 0.0

    def items(self) -> list[StreamItem]:
        """What this turn streams when nothing goes wrong."""
        items: list[StreamItem] = []
        items.extend(ReasoningChunk(p) for p in _pieces(self.reasoning, self.chunk_size))
        items.extend(TextChunk(p) for p in _pieces(self.text, self.chunk_size))
        for index, call in enumerate(self.tool_calls):
            pieces = _pieces(call.arguments, self.chunk_size) or [""]
            items.append(ToolCallChunk(index, call.id, call.name, pieces[0]))
            items.extend(ToolCallChunk(index, arguments=p) for p in pieces[1:])
        items.append(UsageReport(self.usage or self._estimated_usage()))
        items.append(StreamEnd(self.finish_reason or ("tool_calls" if self.tool_calls else "stop")))
        return items

    def _estimated_usage(self) -> Usage:
        size = len(self.text) + len(self.reasoning)
        size += sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        return Usage(input_tokens=10, output_tokens=max(1, size // 4))


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size <= 0:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedProvider:
    """A Provider replaying `ScriptedTurn`s in order; `.requests` records what it got."""

    def __init__(self, turns: Iterable[ScriptedTurn] = (), *, name: str = "scripted") -> None:
        self.name = name
        self.turns: list[ScriptedTurn] = list(turns)
        self.requests: list[ModelRequest] = []
        self.closed = False
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self.turns) - self._next

    def add(self, *turns: ScriptedTurn) -> None:
        self.turns.extend(turns)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        if self._next >= len(self.turns):
            raise ProviderError(
                f"scripted provider has no turn left for request {len(self.requests)}",
                provider=self.name,
                code="script_exhausted",
            )
        turn = self.turns[self._next]
        self._next += 1
        for sent, item in enumerate(turn.items()):
            if turn.error is not None and sent == turn.error_after_chunks:
                raise turn.error
            if turn.delay > 0 and not isinstance(item, UsageReport | StreamEnd):
                await asyncio.sleep(turn.delay)
            yield item
        if turn.error is not None:  # error_after_chunks past the end: fail at the end
            raise turn.error

    async def aclose(self) -> None:
        self.closed = True
