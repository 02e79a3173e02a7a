"""A real MCP server for the tests, written with the same SDK bastion's client uses.

    python tests/mcp/mcp_server.py stdio [--hang] [--die-after SECONDS]
    python tests/mcp/mcp_server.py http --port-file FILE     (loopback, a port of its own)

Tools: echo, slow (writes MARKER once it runs, then sleeps), image (a PNG),
crash (the server exits mid-call), big (a long text), env (one variable of its
environment), grow (adds the tool `late` and says tools/list_changed). A prompt,
review(file, focus?), and resources notes://team/guide (text), notes://team/huge
(300 KiB) and notes://team/logo (binary).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import server_tools  # (beside this file: the script's own folder)
from mcp.server.mcpserver import Context, Image, MCPServer

app = MCPServer("bastion-test")


app.tool()(server_tools.echo)


@app.tool()
async def slow(seconds: float, marker: str = "") -> str:
    """Sleep `seconds`; `marker`: a file written once the call runs."""
    import anyio

    if marker:
        Path(marker).write_text(str(os.getpid()))
    try:
        await anyio.sleep(seconds)  # (the thing under test: a slow tool)
    except anyio.get_cancelled_exc_class():
        if marker:  # the client's notifications/cancelled reached the tool
            Path(marker + ".cancelled").write_text("cancelled")
        raise
    return f"slept {seconds}"


@app.tool()
def image() -> Image:
    """A 12x8 red PNG."""
    return Image(data=server_tools.png(), format="png")


for tool in (server_tools.crash, server_tools.big, server_tools.env):
    app.tool()(tool)


@app.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `late` and tell the client its tool list changed."""
    app.add_tool(server_tools.late)
    await ctx.session.send_tool_list_changed()
    return "grew"


app.prompt()(server_tools.review)
app.resource(
    "notes://team/guide", name="guide", description="The team guide", mime_type="text/plain"
)(server_tools.guide)
app.resource("notes://team/huge", name="huge", mime_type="text/plain")(server_tools.huge)
app.resource("notes://team/logo", name="logo", mime_type="image/png")(server_tools.logo)


def serve_http(port_file: Path) -> None:
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    port_file.write_text(str(sock.getsockname()[1]))
    anyio.run(lambda: server.serve(sockets=[sock]))


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if "--hang" in sys.argv:
        time.sleep(3600)  # (the thing under test: a server that never starts)
    if "--die-after" in sys.argv:  # a server that starts, then exits: again and again
        import threading

        seconds = float(sys.argv[sys.argv.index("--die-after") + 1])
        threading.Timer(seconds, lambda: os._exit(4)).start()
    if mode == "http":
        serve_http(Path(sys.argv[sys.argv.index("--port-file") + 1]))
    else:
        app.run()
