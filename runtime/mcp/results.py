"""An MCP tool's result as the model sees it: its text, its images as images (fitted like
read_file's), and a spill when the text is long.

Text over SPILL_BYTES is written whole to an artifact beside run_command's (the
same `out_…` ids, so read_output pages it) and the model gets its head and tail
with the id, as for a command's long output.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

from runtime.model.tools import ToolOutcome

SPILL_BYTES = 64 * 1024  # what run_command shows inline (tools.limits.max_output_bytes)


def outcome(name: str, result: Any, artifacts_dir: Path) -> ToolOutcome:
    """`result` (an mcp CallToolResult) of tool `name` (namespaced)."""
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            found = _image(block.data, block.mime_type)
            if isinstance(found, dict):
                images.append(found)
            else:
                texts.append(f"[an image the server sent could not be used: {found}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            texts.append(text if text is not None else f"[binary resource {resource.uri}]")
        elif kind == "resource_link":
            texts.append(
                f"[resource {block.uri}" + (f": {block.description}]" if block.description else "]")
            )
        else:
            texts.append(
                f"[{kind or 'unknown'} content omitted: bastion passes on text and images]"
            )
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    text = "\n".join(texts)
    error = bool(result.is_error)
    data: dict[str, Any] = {"mcp": name, "is_error": error, "images": len(images)}
    body, spilled = spill(text, artifacts_dir)
    if spilled is not None:
        data["output_id"] = spilled
        data["output_bytes"] = len(text.encode())
    if error:
        body = f"ERROR from {name}:\n{body}\nhint: read the error; fix the arguments or try another way."
    elif not body:
        body = f"{name} returned " + (f"{len(images)} image(s)." if images else "nothing.")
    return ToolOutcome(ok=not error, model_text=body, data=data, images=tuple(images))


def refused(name: str, code: str, message: str, hint: str) -> ToolOutcome:
    return ToolOutcome(
        ok=False,
        model_text=f"REFUSED {code}: {message}\nhint: {hint}",
        data={"mcp": name, "refusal": {"code": code, "message": message}},
    )


def _image(data: str, mime_type: str) -> dict[str, Any] | str:
    """The image fitted for the model as a ToolOutcome image, or why not."""
    from tools.images import encode_image
    from tools.refusal import Refused

    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "it was not base64"
    try:
        block, _ = encode_image(raw, f"image ({mime_type})")
    except Refused as exc:
        return exc.refusal.message
    return {"media_type": block.media_type, "data": block.data, "width": block.width,
            "height": block.height}  # fmt: skip


def spill(text: str, artifacts_dir: Path) -> tuple[str, str | None]:
    """`text` as the model is shown it, and the artifact id when it was spilled."""
    from tools.output import HEAD_BYTES, TAIL_BYTES, excerpt

    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= SPILL_BYTES:
        return text, None
    artifact_id = "out_" + os.urandom(16).hex()
    try:
        artifacts_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(
            artifacts_dir / f"{artifact_id}.log",
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
    except OSError as exc:  # the excerpt still goes to the model; only paging is lost
        shown = excerpt(raw[:HEAD_BYTES], raw[-TAIL_BYTES:], len(raw))
        note = f"\n[the full output could not be kept: {exc.strerror or exc}]"
        return shown.replace("; page the full output with read_output", "") + note, None
    shown = excerpt(raw[:HEAD_BYTES], raw[-TAIL_BYTES:], len(raw))
    return (
        f'{shown}\n[{len(raw)} bytes in all; read_output {{"id": "{artifact_id}"}} pages them]',
        artifact_id,
    )
