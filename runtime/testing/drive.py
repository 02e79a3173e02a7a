"""A driving process with no screen, for tests of `bastion attach` across processes.

    python -m runtime.testing.drive --session-id ID --cwd DIR --model openai/NAME \\
        [--approval-mode ask] [--prompt TEXT]

Opens the store of $BASTION_HOME the way every front end does, creates the
conversation if it is new, drives it interactively (approvals wait for an
answer, which only an attached terminal can give here), submits PROMPT if
given, prints `serving SOCKET-PATH` once its attach socket listens, and runs
until SIGTERM or SIGINT, when it closes like any front end (lease released,
socket removed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from runtime.harness import Harness, default_home
from runtime.ipc.listen import Listeners, socket_path
from runtime.run.toolbox import WorkspaceToolbox
from runtime.setup.load import load_config, model_resolver


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m runtime.testing.drive")
    p.add_argument("--session-id", required=True)
    p.add_argument("--cwd", required=True)
    p.add_argument("--model", default="openai/loopback")
    p.add_argument("--approval-mode", default="ask")
    p.add_argument("--prompt")
    return p


async def main(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    home = default_home()
    harness = await Harness.open(
        resolve_model=model_resolver(load_config(opts.cwd)),
        toolbox_factory=lambda conv: WorkspaceToolbox(conv.cwd, home / "artifacts" / conv.id),
    )
    harness.serving = Listeners(harness)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        conv_id = opts.session_id
        if not await harness.exists(conv_id):
            await harness.create_conversation(
                os.path.abspath(opts.cwd), settings={"model": opts.model}, conversation_id=conv_id
            )
        await harness.drive(conv_id, interactive=True, approval_mode=opts.approval_mode)
        if opts.prompt:
            await harness.submit(conv_id, opts.prompt)
        print(f"serving {socket_path(harness.home, conv_id)}", flush=True)
        await stop.wait()
        return 0
    finally:
        await harness.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
