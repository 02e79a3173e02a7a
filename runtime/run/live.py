"""What this process has streamed for a run and maybe not yet committed: the text,
reasoning and command output buffers the model loop (runtime.run.loop) and the tool
calls (runtime.run.calls) both write, so that neither imports the other for them."""

from __future__ import annotations

import msgspec

from runtime.model.ids import now

__all__ = ["Buffer", "LiveStream", "now"]


class Buffer:
    """Streamed text: what arrived, and how much of it is committed."""

    __slots__ = ("committed", "length", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.committed = 0

    def add(self, text: str) -> int:
        offset = self.length
        self.parts.append(text)
        self.length += len(text)
        return offset

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    def pending(self) -> tuple[int, str] | None:
        if self.committed >= self.length:
            return None
        return self.committed, self.text[self.committed :]

    def mark(self, end: int) -> None:
        self.committed = max(self.committed, end)


class LiveStream(msgspec.Struct):
    """What this process has streamed for a run but maybe not yet committed."""

    epoch: int
    entry_id: str | None = None
    body: Buffer = msgspec.field(default_factory=Buffer)
    reasoning: Buffer = msgspec.field(default_factory=Buffer)
    outputs: dict[str, Buffer] = msgspec.field(default_factory=dict)
    seq: int = 0

    @property
    def text(self) -> str:
        return self.body.text

    def restart(self) -> None:
        self.body, self.reasoning = Buffer(), Buffer()
