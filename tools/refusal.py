"""Typed refusals: every ordinary failure of a tool is one of these.

A refusal names what went wrong (``code``), says it in words the model can read
(``message``) and names the next move (``hint``). Tools raise ``Refused``
internally; the tool entry point turns it into a ``ToolResult``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple


class RefusalCode(StrEnum):
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    FORBIDDEN = "FORBIDDEN"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    TOO_LARGE = "TOO_LARGE"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    SPILL_REFERENCE_UNKNOWN = "SPILL_REFERENCE_UNKNOWN"
    INTERNAL = "INTERNAL"


class Refusal(NamedTuple):
    code: RefusalCode
    message: str
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code.value, "message": self.message, "hint": self.hint}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Refusal:
        return cls(RefusalCode(data["code"]), str(data["message"]), str(data.get("hint", "")))

    def text(self) -> str:
        head = f"REFUSED {self.code.value}: {self.message}"
        return f"{head}\nhint: {self.hint}" if self.hint else head


class Refused(Exception):
    """Raised inside tools; carries the refusal (and any partial data) outwards."""

    def __init__(
        self,
        code: RefusalCode,
        message: str,
        hint: str = "",
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.refusal = Refusal(code, message, hint)
        self.data = data or {}
