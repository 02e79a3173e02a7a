"""Decode, orient and shrink an image for the model (Pillow, imported lazily)."""

from __future__ import annotations

import base64
import io

from tools.refusal import RefusalCode, Refused
from tools.result import ImageBlock

MAX_SIDE = 2000
MAX_BASE64 = 4_500_000
MAX_PIXELS = 64_000_000


def encode_image(raw: bytes, shown: str) -> tuple[ImageBlock, tuple[int, int]]:
    """Return the encoded block and the original (width, height)."""
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(raw)) as opened:
            original = opened.size
            if original[0] * original[1] > MAX_PIXELS:  # before decoding anything
                raise Refused(
                    RefusalCode.TOO_LARGE,
                    f"'{shown}' is {original[0]}x{original[1]} pixels",
                    f"images up to {MAX_PIXELS} pixels can be read; scale it down first",
                )
            if opened.format == "JPEG":
                opened.draft("RGB", (MAX_SIDE, MAX_SIDE))  # decode at reduced scale
            opened.load()
            image = ImageOps.exif_transpose(opened) or opened
            image.thumbnail((MAX_SIDE, MAX_SIDE))
            return _fit(image), original
    except Refused:
        raise
    except Image.DecompressionBombError:
        raise Refused(
            RefusalCode.TOO_LARGE,
            f"'{shown}' has too many pixels to decode safely",
            f"images up to {MAX_PIXELS} pixels can be read; scale it down first",
        ) from None
    except Exception as exc:  # Pillow raises many kinds for bad input
        raise Refused(
            RefusalCode.INVALID_ARGUMENT,
            f"'{shown}' could not be decoded as an image ({type(exc).__name__})",
            "check the file type with run_command `file`",
        ) from None


def _fit(image: object) -> ImageBlock:
    from PIL import Image

    assert isinstance(image, Image.Image)
    alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if alpha:
        data = _save(image.convert("RGBA"), "PNG")
        if len(data) * 4 // 3 <= MAX_BASE64:
            return _block(data, "image/png", image.size)
    rgb = image.convert("RGB")
    quality = 85
    while True:
        data = _save(rgb, "JPEG", quality=quality)
        if len(data) * 4 // 3 <= MAX_BASE64:
            return _block(data, "image/jpeg", rgb.size)
        if quality > 55:
            quality -= 15
            continue
        width, height = rgb.size
        if width < 16 or height < 16:
            raise Refused(
                RefusalCode.TOO_LARGE,
                "the image cannot be shrunk to fit",
                "crop or convert it with run_command first",
            )
        rgb = rgb.resize((max(1, int(width * 0.75)), max(1, int(height * 0.75))))


def _save(image: object, fmt: str, **options: int) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)  # type: ignore[attr-defined]
    return buffer.getvalue()


def _block(data: bytes, media_type: str, size: tuple[int, int]) -> ImageBlock:
    return ImageBlock(media_type, base64.b64encode(data).decode("ascii"), size[0], size[1])
