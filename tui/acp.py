"""`bastion acp`: bastion as an Agent Client Protocol agent (ACP v1: JSON-RPC 2.0 on stdio).

An editor (Zed, a JetBrains IDE, Neovim, ...) starts `bastion acp [--approval-mode
MODE] [--model SPEC]` and drives it. Each ACP session is an ordinary bastion
conversation, opened and driven as `bastion` opens one, its session id the
conversation's id: once its first prompt is stored, `bastion -r ID`, `bastion
attach ID` and `bastion export ID` see it (a session with no prompt yet is not
stored, as in every front end). `session/load` drives a stored one here, replays
its transcript (prompts, answers, reasoning, tool calls with their results, the
todo list) before answering, and resumes its unfinished work, as `bastion -r` does;
after a crash (even SIGKILL) that is what the store kept. The mapping:
`tui.acp_agent` (the methods), `tui.acp_session` (one session: the approvals and
the prompt's end), `tui.acp_updates` (view -> `session/update`s).

stdout carries JSON-RPC alone: the protocol writes to its own copy of fd 1, and fd
1 then points at stderr, so nothing else bastion or a child process prints can
reach the editor's parser. Diagnostics and logs go to stderr (editors keep it in
their agent log).

The SDK (`agent-client-protocol`, the `acp` extra) is imported only when this
command runs; without it `bastion acp` says how to install it and exits 2.

What a hostile editor or repository can do with `bastion acp`
-------------------------------------------------------------
The editor stands where the user's terminal stands: it sends prompts, answers the
approvals bastion asks for, cancels, and loads any stored session by id (the
store is the user's; `bastion -r ID` can do as much). It cannot do more than the
user's flags and config allow: the approval mode is `bastion acp`'s own
(`--approval-mode`, else the user's config), a call that mode and the rules allow or
refuse is never put to it, "Always allow" saves a rule for that session only
(never to a project's files, never for a shell or an interpreter: no rule is
offered then), and an answer that is not an allowing option (a cancelled request,
an option id bastion did not offer) denies. It cannot trust a folder: nothing is
asked on stdio, and `--trust` is not taken. MCP servers it names are not started.
An editor that allows everything it is asked is the user's choice, as full-auto is.

A repository opened as a session's `cwd` is as untrusted as anywhere: its
`.bastion/` files (config, approval rules, hooks, agents, themes) apply only to a
folder the user trusted (`bastion trust`), with the same limits as in every front
end; untrusted, one line on stderr says what was ignored. Its AGENTS.md is read
pinned, capped and without following symlinks. The tools stay inside the workspace
and commands in their sandbox. A prompt's resource link becomes an `@path`
mention, read through the workspace like `read_file` (a link outside it is sent as
its URI and never read). Text from the model, a command, a hook or the repository
reaches the editor with its control characters made visible (`runtime.visible`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from typing import Any, Final

from tui.exits import EXIT_OK, EXIT_USAGE, error_line

__all__ = ["run"]

INSTALL: Final = "bastion acp needs the Agent Client Protocol SDK: pip install 'bastion[acp]'"
PIPES: Final = (
    "bastion acp speaks JSON-RPC on stdin and stdout, which must be pipes: an editor "
    "starts it (see `bastion acp --help`)"
)
#: A JSON-RPC line may carry a whole file (a write's arguments, a replayed result).
LINE_LIMIT: Final = 50 * 1024 * 1024


def run(opts: Any) -> int:
    try:
        import acp  # noqa: F401  (the optional extra: only checked for here)
    except ImportError:
        error_line(INSTALL)
        return EXIT_USAGE
    if not all(_streams(fd) for fd in (0, 1)):
        error_line(PIPES)
        return EXIT_USAGE
    from runtime import probe_sandbox_soon

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="bastion acp: %(name)s: %(message)s"
    )
    probe_sandbox_soon()  # (its child interpreter runs while the editor initializes)
    return asyncio.run(_serve(opts, _claim_stdout()))


def _streams(fd: int) -> bool:
    """Whether `fd` is a pipe, a socket or a terminal: what asyncio can read and write
    as it comes (a regular file or /dev/null it cannot)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _claim_stdout() -> int:
    """A private copy of fd 1 for JSON-RPC; fd 1 itself then points at stderr, so a
    stray print (or a child that inherits it) cannot write into the protocol."""
    sys.stdout.flush()
    rpc = os.dup(1)  # (not inherited by children)
    os.dup2(2, 1)
    return rpc


async def _serve(opts: Any, rpc_fd: int) -> int:
    """Speak ACP on stdin and `rpc_fd` until the editor closes stdin (or SIGTERM/SIGINT),
    then close every session."""
    from typing import cast

    from acp import Agent, run_agent

    from tui.acp_agent import BastionAgent

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(rpc_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    agent = BastionAgent(opts)
    # (a structural Agent: the methods it leaves out are "method not found" to the SDK)
    serving = loop.create_task(run_agent(cast(Agent, agent), writer, reader))
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, serving.cancel)
    try:
        await serving
    except asyncio.CancelledError:
        if not serving.cancelled():
            raise
    finally:
        await agent.close()
        writer.close()
    return EXIT_OK
