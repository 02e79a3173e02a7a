"""A hostile MCP server for the tests, on the lean test double's protocol code
(tests/mcp/lean_mcp.py: the real MCP wire format as the `mcp` SDK v2.3.0 server
speaks it, with the standard library only, so it starts without the SDK's ~0.7 s of
CPU); what is hostile is written past it, straight to the pipe.

    python tests/hostile/mcp_hostile_server.py

Tools:
- not_utf8: answers its own call with a JSON-RPC line whose text is not UTF-8
  (written straight to stdout), then never answers properly.
- surrogate: answers its own call with a line whose text is a lone surrogate
  (`"\\udc80"`: valid JSON, but no string of it can be encoded), then never answers.
- flood: writes `megabytes` MiB to stderr, then answers "flooded".
- echo: says its text back (the server still works after the others).
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))  # (lean_mcp: a script's import)

from lean_mcp import Call, Cancelled, Server, main

app = Server("bastion-hostile")


def _answer_raw(call: Call, text_json: bytes) -> None:
    """The response to this call, written past the protocol code: `text_json` is the
    JSON of the text block's `text` (bytes, so it may be anything)."""
    sys.stdout.flush()
    head = json.dumps({"jsonrpc": "2.0", "id": call.request_id}).encode()[:-1]
    text = b'{"type": "text", "text": ' + text_json + b"}"
    structured = b'"structuredContent": {"result": ' + text_json + b"}"
    line = head + b', "result": {"content": [' + text + b"], " + structured + b"}}\n"
    os.write(1, line)


def _forever(call: Call) -> str:
    call.cancelled.wait(3600)  # (the thing under test: a tool that never answers)
    raise Cancelled


@app.tool()
def not_utf8(call: Call) -> str:
    """An answer that is not UTF-8."""
    _answer_raw(call, b'"caf\xe9 \xff\xfe"')
    return _forever(call)


@app.tool()
def surrogate(call: Call) -> str:
    """An answer holding a lone surrogate."""
    _answer_raw(call, b'"half a pair: \\udc80 \\ud83d"')
    return _forever(call)


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
    main(app, sys.argv)
