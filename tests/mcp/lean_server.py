"""The tests' MCP server: a test double speaking the real MCP wire format, as the
official `mcp` SDK v2.3.0 server does (tests/mcp/lean_mcp.py), with the standard
library only, so each of the dozens the suite starts costs a few hundredths of a
second of CPU rather than the SDK's ~0.7 s import. It offers what tests/mcp/mcp_server.py
(the same server written with the SDK, kept for the interop tests) offers.

    python tests/mcp/lean_server.py stdio [--hang] [--die-after SECONDS]
    python tests/mcp/lean_server.py http --port-file FILE     (loopback, a port of its own)

Tools: echo, slow (writes MARKER once it runs, then sleeps; MARKER.cancelled when the
client's notifications/cancelled reaches it), image (a PNG), crash (the server exits
mid-call), big (a long text), env (one variable of its environment), grow (adds the
tool `late` and says tools/list_changed). A prompt, review(file, focus?), and
resources notes://team/guide (text), notes://team/huge (300 KiB) and
notes://team/logo (binary).
"""

import io
import os
import sys
from pathlib import Path

from lean_mcp import Call, Cancelled, Image, Server, main

app = Server("bastion-test")


@app.tool()
def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


@app.tool()
def slow(call: Call, seconds: float, marker: str = "") -> str:
    """Sleep `seconds`; `marker`: a file written once the call runs."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    if call.cancelled.wait(seconds):  # (the thing under test: a slow tool)
        if marker:  # the client's notifications/cancelled reached the tool
            Path(marker + ".cancelled").write_text("cancelled")
        raise Cancelled
    return f"slept {seconds}"


@app.tool()
def image() -> Image:
    """A 12x8 red PNG."""
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (12, 8), (255, 0, 0)).save(buffer, format="PNG")
    return Image(data=buffer.getvalue(), format="png")


@app.tool()
def crash() -> str:
    """The server exits in the middle of this call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
def big(size: int) -> str:
    """`size` bytes of numbered lines."""
    lines, total, n = [], 0, 0
    while total < size:
        n += 1
        line = f"line {n:07d} " + "x" * 50
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


@app.tool()
def env(name: str) -> str:
    """The value of environment variable `name` in the server ("<unset>" if none)."""
    return os.environ.get(name, "<unset>")


def late() -> str:
    """A tool added while the server runs."""
    return "late tool ran"


@app.tool()
def grow(call: Call) -> str:
    """Add the tool `late` and tell the client its tool list changed."""
    app.add_tool(late)
    call.notify("notifications/tools/list_changed")
    return "grew"


@app.prompt()
def review(file: str, focus: str = "") -> str:
    """Review a file."""
    return f"Please review {file}" + (f", looking for {focus}." if focus else ".")


@app.resource(
    "notes://team/guide", name="guide", description="The team guide", mime_type="text/plain"
)
def guide() -> str:
    return "GUIDE: tabs, never spaces.\n"


@app.resource("notes://team/huge", name="huge", mime_type="text/plain")
def huge() -> str:
    return "h" * (300 * 1024)


@app.resource("notes://team/logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG\r\n\x1a\n"


if __name__ == "__main__":
    main(app, sys.argv)
