"""Images for the model: loaded from files, fitted to each provider's limit, or replaced
by a placeholder for a model that takes none.

    load_image(path)                  an image file -> ImagePart (EXIF orientation applied,
                                      at most 2000 px a side, re-encoded as JPEG or PNG)
    prompt_images(text, root)         the images a prompt names by path (`shot.png`,
                                      `@docs/diagram.jpg`, an absolute path), loaded
    fit_image(part, max_side)         an ImagePart shrunk to a provider's limit
    adapt_content(content, ...)       a message's parts as a model can take them

`@file` attachments and pasted paths go through `load_image`/`prompt_images`; the
request builder applies `adapt_content` to every message, so read_file's images,
prompt images and attachments reach each provider the same way: OpenAI chat as an
`image_url` data URL, Anthropic as a base64 `image` block (runtime.providers).

Limits: Anthropic resizes anything over 1568 px on the long side (so sending more
only costs upload time), OpenAI's high detail fits 2048 px.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import re
from collections.abc import Sequence
from pathlib import Path

from runtime.model.errors import BastionError
from runtime.model.llm import ContentPart, ImagePart, TextPart

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageError",
    "adapt_content",
    "fit_image",
    "load_image",
    "max_side_for",
    "prompt_images",
]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
ANTHROPIC_MAX_SIDE = 1568
DEFAULT_MAX_SIDE = 2048
MAX_PROMPT_IMAGES = 8
_MAX_FILE = 50 * 1024 * 1024
_PATHISH = re.compile(r"""(?:^|[\s(\[<"'`])@?([^\s"'`<>()\[\]]+\.(?:png|jpe?g|gif|webp))\b""", re.I)


class ImageError(BastionError):
    """An image file that cannot be given to the model: missing, too large, not an image."""

    code = "image"


def max_side_for(spec: str) -> int:
    """The longest side worth sending to `spec`'s provider."""
    return ANTHROPIC_MAX_SIDE if spec.startswith("anthropic/") else DEFAULT_MAX_SIDE


def load_image(path: str | os.PathLike[str]) -> ImagePart:
    """An image file as the model should see it; ImageError says what is wrong."""
    from tools.images import encode_image
    from tools.refusal import Refused

    file = Path(path)
    try:
        size = file.stat().st_size
        if size > _MAX_FILE:
            raise ImageError(f"{file} is {size:,} bytes", hint="images up to 50 MB can be sent")
        raw = file.read_bytes()
    except OSError as exc:
        raise ImageError(
            f"cannot read {file}: {exc.strerror or exc}", hint="check the path"
        ) from exc
    try:
        block, _ = encode_image(raw, file.name)
    except Refused as exc:
        raise ImageError(exc.refusal.message, hint=exc.refusal.hint) from None
    return ImagePart(block.media_type, block.data)


def prompt_images(text: str, root: str | os.PathLike[str]) -> tuple[list[ImagePart], list[str]]:
    """Images named in a prompt by a path to an existing file (relative to `root`, or
    absolute), at most eight; and a note for each named image that could not be read."""
    images: list[ImagePart] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for match in _PATHISH.finditer(text):
        name = match.group(1).rstrip(".,;:!?")
        candidate = Path(name).expanduser()
        file = candidate if candidate.is_absolute() else Path(root) / candidate
        if file in seen or not file.is_file():
            continue
        seen.add(file)
        if len(images) >= MAX_PROMPT_IMAGES:
            notes.append(f"{name}: not attached (at most {MAX_PROMPT_IMAGES} images a prompt)")
            continue
        try:
            images.append(load_image(file))
        except ImageError as exc:
            notes.append(f"{name}: {exc}")
    return images, notes


@functools.lru_cache(maxsize=64)
def _fitted(media_type: str, data: str, max_side: int) -> ImagePart:
    from PIL import Image

    raw = base64.b64decode(data)
    with Image.open(io.BytesIO(raw)) as opened:
        if max(opened.size) <= max_side:
            return ImagePart(media_type, data)
        opened.load()
        image = opened.copy()
    image.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    if media_type == "image/png" or image.mode in ("RGBA", "LA", "P"):
        image.save(buffer, format="PNG")
        media_type = "image/png"
    else:
        image.convert("RGB").save(buffer, format="JPEG", quality=85)
        media_type = "image/jpeg"
    return ImagePart(media_type, base64.b64encode(buffer.getvalue()).decode("ascii"))


def fit_image(part: ImagePart, max_side: int) -> ImagePart:
    """`part` at most `max_side` pixels on its long side (re-encoded only if it shrank)."""
    try:
        return _fitted(part.media_type, part.data, max_side)
    except Exception:  # undecodable stored data: send it as it is, the provider will say
        return part


def placeholder(part: ImagePart, model: str) -> TextPart:
    return TextPart(
        f"[an image ({part.media_type}) was attached here, but {model or 'this model'} "
        "does not take image input, so it is left out; say so if the task needs it. "
        f'If the model does take images, set images = true in [models."{model}"].]'
    )


def adapt_content(
    content: str | tuple[ContentPart, ...], *, images: bool, max_side: int, model: str
) -> str | tuple[ContentPart, ...]:
    """A message's content for a model: images fitted, or placeholders when it takes none."""
    if isinstance(content, str) or not any(isinstance(p, ImagePart) for p in content):
        return content
    adapted: Sequence[ContentPart] = [
        p
        if isinstance(p, TextPart)
        else (fit_image(p, max_side) if images else placeholder(p, model))
        for p in content
    ]
    return tuple(adapted)
