"""``python -m tools [--limits JSON|unbounded] [--text] NAME 'JSON-ARGS'``

Runs one tool against the current directory and prints its JSON result (or,
with ``--text``, what the model would see). For debugging and benchmarks.
"""

from __future__ import annotations

import gc
import json
import os
import sys

USAGE = "usage: python -m tools [--limits JSON|unbounded] [--text] NAME 'JSON-ARGS'"


def main(argv: list[str]) -> int:
    # One tool, then exit: a search's 100k result objects would only make the cyclic
    # collector walk them over and over, for no cycle.
    gc.disable()
    from tools import Limits, ToolContext, Workspace, WorkspaceError, run_tool_sync

    limits, text = Limits(), False
    while argv and argv[0].startswith("--"):
        flag = argv.pop(0)
        if flag == "--text":
            text = True
        elif flag == "--limits" and argv:
            value = argv.pop(0)
            limits = Limits.unbounded() if value == "unbounded" else Limits(**json.loads(value))
        else:
            print(USAGE, file=sys.stderr)
            return 2
    if len(argv) not in (1, 2):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        args = json.loads(argv[1]) if len(argv) == 2 else {}
    except json.JSONDecodeError as exc:
        print(f"bad JSON arguments: {exc}", file=sys.stderr)
        return 2
    try:
        workspace = Workspace.open(os.getcwd())
    except WorkspaceError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    with workspace:
        result = run_tool_sync(argv[0], args, ToolContext(workspace, limits))
    if text:
        sys.stdout.write(result.model_text() + "\n")
    else:
        sys.stdout.flush()
        sys.stdout.buffer.write(encode(result.to_dict()))
    return 0 if result.ok else 1


# From this many dicts in a result's largest list (search matches), orjson repays
# the ~12 ms its import costs in a fresh process: 124k matches take 25 ms with it,
# 200 ms with json.dumps (measured). A list of strings (glob's 13k paths: 4 ms)
# stays with json, which is already imported.
ORJSON_FROM = 10_000


def encode(data: dict[str, object]) -> bytes:
    """Compact JSON and a newline. Strings orjson refuses (lone surrogates from
    undecodable names) go through json, which escapes them."""
    if _largest_dict_list(data) >= ORJSON_FROM:
        import orjson

        try:
            return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:
            pass
    # check_circular=False: a result is a tree by construction. The text is ASCII.
    text = json.dumps(data, separators=(",", ":"), check_circular=False)
    return text.encode("ascii") + b"\n"


def _largest_dict_list(data: dict[str, object]) -> int:
    payload = data.get("data")
    if not isinstance(payload, dict):
        return 0
    lists = [v for v in payload.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
    return max(map(len, lists), default=0)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stdout.buffer.flush()
    # Nothing is left to clean up; skip tearing down a large result object by object.
    os._exit(code)
