"""One model request's state as the loop streams it (`TurnState`: the calls being
assembled, the usage, the finish reason), how the qualities of summed usage combine
(`worse`), and the error a failed request leaves on its run (`run_error`)."""

from __future__ import annotations

from typing import Any

from runtime.model.llm import ModelRequest, ProviderError, ToolCallChunk, Usage
from runtime.model.results import Quality
from runtime.run.spend import Spent


def run_error(
    exc: ProviderError, compacted: bool | None, cancelled: bool = False
) -> dict[str, Any]:
    """The error a failed run records. A context overflow that compacting did not cure
    says so and what is left to do, since the provider's own advice ("adjust your
    input") is no help to someone whose conversation was just compacted."""
    error = exc.to_dict()
    if exc.is_context_overflow() and compacted is not None:
        how = "even after compacting" if compacted else "and nothing older can be compacted"
        if cancelled:
            how = "uncompacted (its compaction was cancelled)"
        error["message"] = (
            f"{exc.message} — the conversation does not fit the model's context window {how}: "
            "shorten the prompt, start a new conversation (/new), or use a model with a "
            "larger window"
        )
    return error


_QUALITY_ORDER = (Quality.MEASURED, Quality.ESTIMATED, Quality.UNAVAILABLE)


def worse(a: str, b: str) -> Quality:
    """The less trustworthy of two usage qualities: a sum is only as good as its worst part."""
    return max(Quality(a), Quality(b), key=_QUALITY_ORDER.index)


class TurnState:
    __slots__ = (
        "calls", "finish_reason", "request", "signature", "spent", "usage", "usage_reported",
    )  # fmt: skip

    def __init__(self) -> None:
        self.request: ModelRequest | None = None
        self.calls: dict[int, list[str]] = {}
        self.usage = Usage()
        self.spent = Spent()  # what failed attempts before this one used
        self.usage_reported = False
        self.finish_reason: str | None = None
        self.signature = ""  # of the response's thinking (Anthropic), kept with its calls

    def add_call_chunk(self, chunk: ToolCallChunk) -> None:
        call = self.calls.setdefault(chunk.index, ["", "", ""])
        if chunk.id:
            call[0] = chunk.id
        if chunk.name:
            call[1] = chunk.name
        call[2] += chunk.arguments

    def finished(self) -> list[tuple[str, str, str]]:
        """(provider id, name, arguments) of each call, in index order."""
        return [
            (call_id, name, arguments or "{}")
            for call_id, name, arguments in (self.calls[i] for i in sorted(self.calls))
        ]
