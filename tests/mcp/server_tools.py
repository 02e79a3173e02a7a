"""What the tests' MCP server offers, as plain functions: the SDK server
(tests/mcp/mcp_server.py) and its lean double (tests/mcp/lean_server.py) each
register these with their own framework, so the two cannot drift apart. `slow`,
`image` and `grow` use what each framework gives a tool (its cancellation, its image
type, its notifications) and stay in each server."""

from __future__ import annotations

import io
import os
import sys


def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


def png() -> bytes:
    """A 12x8 red PNG (the `image` tool's)."""
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (12, 8), (255, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def crash() -> str:
    """The server exits in the middle of this call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


def big(size: int) -> str:
    """`size` bytes of numbered lines."""
    lines, total, n = [], 0, 0
    while total < size:
        n += 1
        line = f"line {n:07d} " + "x" * 50
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def env(name: str) -> str:
    """The value of environment variable `name` in the server ("<unset>" if none)."""
    return os.environ.get(name, "<unset>")


def late() -> str:
    """A tool added while the server runs."""
    return "late tool ran"


def review(file: str, focus: str = "") -> str:
    """Review a file."""
    return f"Please review {file}" + (f", looking for {focus}." if focus else ".")


def guide() -> str:
    return "GUIDE: tabs, never spaces.\n"


def huge() -> str:
    return "h" * (300 * 1024)


def logo() -> bytes:
    return b"\x89PNG\r\n\x1a\n"
