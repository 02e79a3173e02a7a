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

import os
import sys
from pathlib import Path

import server_tools  # (beside this file: the script's own folder)
from lean_mcp import Call, Cancelled, Image, Server, main

app = Server("bastion-test")


app.tool()(server_tools.echo)


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
    return Image(data=server_tools.png(), format="png")


for tool in (server_tools.crash, server_tools.big, server_tools.env):
    app.tool()(tool)


@app.tool()
def grow(call: Call) -> str:
    """Add the tool `late` and tell the client its tool list changed."""
    app.add_tool(server_tools.late)
    call.notify("notifications/tools/list_changed")
    return "grew"


app.prompt()(server_tools.review)
app.resource(
    "notes://team/guide", name="guide", description="The team guide", mime_type="text/plain"
)(server_tools.guide)
app.resource("notes://team/huge", name="huge", mime_type="text/plain")(server_tools.huge)
app.resource("notes://team/logo", name="logo", mime_type="image/png")(server_tools.logo)


if __name__ == "__main__":
    main(app, sys.argv)
