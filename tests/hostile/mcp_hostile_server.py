"""A hostile MCP server for the tests, written with the same SDK bastion's client uses.

    python tests/hostile/mcp_hostile_server.py

Tools:
- not_utf8: answers its own call with a JSON-RPC line whose text is not UTF-8
  (written straight to stdout, past the SDK), then never answers properly.
- surrogate: answers its own call with a line whose text is a lone surrogate
  (`"\\udc80"`: valid JSON, but no string of it can be encoded), then never answers.
- flood: writes `megabytes` MiB to stderr, then answers "flooded".
- echo: says its text back (the server still works after the others).
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("bastion-hostile")
# The SDK serves the wire from a copy of fd 1 and points fd 1 at stderr (so a stray
# print cannot corrupt it); a copy taken before it starts still reaches the client.
WIRE = os.dup(1)


def _answer_raw(ctx: Context, text_json: bytes) -> None:
    """The response to this call, written past the SDK: `text_json` is the JSON of the
    text block's `text` (bytes, so it may be anything)."""
    rid = ctx.request_id  # (the SDK gives it as a string; the client sent a number)
    head = json.dumps({"jsonrpc": "2.0", "id": int(rid) if rid.isdigit() else rid}).encode()[:-1]
    text = b'{"type": "text", "text": ' + text_json + b"}"
    structured = b'"structuredContent": {"result": ' + text_json + b"}"
    line = head + b', "result": {"content": [' + text + b"], " + structured + b"}}\n"
    os.write(WIRE, line)


async def _forever() -> None:
    import anyio

    await anyio.sleep(3600)  # (the thing under test: a tool that never answers)


@app.tool()
async def not_utf8(ctx: Context) -> str:
    """An answer that is not UTF-8."""
    _answer_raw(ctx, b'"caf\xe9 \xff\xfe"')
    await _forever()
    return "never"


@app.tool()
async def surrogate(ctx: Context) -> str:
    """An answer holding a lone surrogate."""
    _answer_raw(ctx, b'"half a pair: \\udc80 \\ud83d"')
    await _forever()
    return "never"


@app.tool()
def flood(megabytes: int) -> str:
    """`megabytes` MiB on stderr."""
    block = ("stderr flood " * 80 + "\n").encode()
    total = megabytes * 1024 * 1024
    written = 0
    while written < total:
        written += os.write(2, block)
    return "flooded"


@app.tool()
def echo(text: str) -> str:
    """Say `text` back."""
    return f"echo: {text}"


if __name__ == "__main__":
    sys.stderr.write("hostile server up\n")
    app.run()
