"""Ctrl+V: an image on the system clipboard, attached to the prompt.

Terminals paste text, not images; so, as other agents do, the app asks the system's
clipboard tool for an image: `wl-paste` under Wayland, `xclip` under X11, `pngpaste`
on macOS (with `osascript` as the fallback there). A PNG it gets is checked with
Pillow, written under $BASTION_HOME/pasted/ (0600, a name bastion makes) and named in
the prompt as `@PATH`, which attaches it as an image part like any image path
(runtime.context.images fits it to the provider's limit). No image on the clipboard,
or no clipboard tool: one line says so and the prompt is unchanged.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

__all__ = ["ClipboardEmpty", "paste_image"]

MAX_IMAGE_BYTES = 32 << 20
TIMEOUT = 5.0  # seconds a clipboard tool gets


class ClipboardEmpty(Exception):
    """No image could be read from the clipboard (said in one line)."""


def _commands() -> list[list[str]]:
    """The clipboard tools to ask, most likely first, for this system."""
    found: list[list[str]] = []
    if sys.platform == "darwin":
        found.append(["pngpaste", "-"])
    if os.environ.get("WAYLAND_DISPLAY"):
        found.append(["wl-paste", "--no-newline", "--type", "image/png"])
    if os.environ.get("DISPLAY") or not found:
        found.append(["xclip", "-selection", "clipboard", "-target", "image/png", "-out"])
    return [c for c in found if shutil.which(c[0])]


def paste_image(home: Path) -> Path:
    """The clipboard's image, saved as a PNG under `home`/pasted; ClipboardEmpty when
    there is none (or no tool to ask)."""
    commands = _commands()
    if not commands:
        raise ClipboardEmpty(
            "no clipboard tool to read an image with (install wl-clipboard, xclip or "
            "pngpaste), or drag the image file into the prompt"
        )
    for command in commands:
        try:
            done = subprocess.run(command, capture_output=True, timeout=TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        data = done.stdout
        if done.returncode == 0 and data and len(data) <= MAX_IMAGE_BYTES and _is_image(data):
            folder = home / "pasted"
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = folder / f"clip-{uuid.uuid4().hex[:12]}.png"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return path
    raise ClipboardEmpty("the clipboard holds no image (copy one, or drag its file in)")


def _is_image(data: bytes) -> bool:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except (UnidentifiedImageError, OSError, ValueError):
        return False
    return True
