"""What a tool hands back: plain frozen data, JSON-able, plus the model's view of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from tools.refusal import Refusal, RefusalCode, Refused

Formatter = Callable[[dict[str, Any]], str]
_FORMATTERS: dict[str, Formatter] = {}


def register_formatter(tool: str, formatter: Formatter) -> None:
    """Each tool module registers how its data reads to the model."""
    _FORMATTERS[tool] = formatter


class ImageBlock(NamedTuple):
    media_type: str
    data: str  # base64
    width: int
    height: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "media_type": self.media_type,
            "data": self.data,
            "width": self.width,
            "height": self.height,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImageBlock:
        return cls(
            str(data["media_type"]), str(data["data"]), int(data["width"]), int(data["height"])
        )


class ToolResult(NamedTuple):
    ok: bool
    data: dict[str, Any]
    refusal: Refusal | None = None
    images: tuple[ImageBlock, ...] = ()
    tool: str = ""  # which tool produced it: picks how model_text() renders data

    @classmethod
    def success(
        cls, tool: str, data: dict[str, Any], images: tuple[ImageBlock, ...] = ()
    ) -> ToolResult:
        return cls(True, data, None, images, tool)

    @classmethod
    def refused(
        cls,
        tool: str,
        code: RefusalCode,
        message: str,
        hint: str = "",
        data: dict[str, Any] | None = None,
    ) -> ToolResult:
        return cls(False, data or {}, Refusal(code, message, hint), (), tool)

    @classmethod
    def from_refused(cls, tool: str, exc: Refused) -> ToolResult:
        return cls(False, exc.data, exc.refusal, (), tool)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "ok": self.ok,
            "data": self.data,
            "refusal": self.refusal.to_dict() if self.refusal else None,
            "images": [image.to_dict() for image in self.images],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        refusal = data.get("refusal")
        return cls(
            bool(data["ok"]),
            dict(data.get("data") or {}),
            Refusal.from_dict(refusal) if refusal else None,
            tuple(ImageBlock.from_dict(i) for i in data.get("images") or ()),
            str(data.get("tool", "")),
        )

    def _body(self) -> str:
        if not self.data:
            return ""
        formatter = _FORMATTERS.get(self.tool)
        if formatter is not None:
            try:
                return formatter(self.data)
            except (KeyError, TypeError, ValueError):  # partial data beside a refusal
                return ""
        return json.dumps(self.data, ensure_ascii=False, indent=1)

    def model_text(self) -> str:
        """The compact text the model sees."""
        body = self._body()
        if self.refusal is None:
            return body
        return f"{self.refusal.text()}\n{body}".rstrip() if body else self.refusal.text()
