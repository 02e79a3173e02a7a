"""Running one hook command: in the command sandbox, with the workspace as cwd, the
event as JSON on stdin, and a time limit.

The command is `bash -c COMMAND` under the same supervisor as run_command
(`tools.lifetime.Supervised`, sandbox from `tools.sandbox_run.prepare`): it runs
in a process group of its own and everything it starts is killed when it exits,
when its time runs out (SIGTERM, then SIGKILL after a grace) and when bastion
dies (the supervisor's lifeline closes). stdin is a temporary file holding the
event, so a hook that never reads it cannot block bastion on a full pipe.
stdout and stderr are read to their end but kept only up to OUTPUT_CAP bytes
each; more than that on stdout makes the hook's answer unusable (no decision).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import time
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)
OUTPUT_CAP = 256 * 1024  # bytes of stdout (the answer) and of stderr kept
DRAIN_S = 1.0  # after the supervisor ends: how long the pipes may take to close


class HookOutput(msgspec.Struct, frozen=True):
    """What one hook did: its exit code (None if it never ran or was killed), stdout
    and stderr (each capped), whether its time ran out or stdout went over the cap,
    and `error`: one line when it could not be started at all."""

    exit_code: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    stdout_over: bool = False
    error: str = ""
    duration_ms: int = 0


def hook_env(root: str, event: str) -> dict[str, str]:
    """run_command's environment, plus where the project is and which event this is
    (CLAUDE_PROJECT_DIR too, so hook scripts written for Claude Code work)."""
    from tools.command import default_env

    env = default_env()
    env.update(BASTION_PROJECT_DIR=root, CLAUDE_PROJECT_DIR=root, BASTION_HOOK_EVENT=event)
    return env


async def run_hook(
    command: str,
    payload: bytes,
    root: str,
    policy: SandboxPolicy | None,
    timeout: float,
    env: dict[str, str],
) -> HookOutput:
    """Run `command` once (see the module docstring). Never raises for what the hook
    does; a cancellation (an interrupt) kills it and everything it started first."""
    from tools.command import spawn_options
    from tools.lifetime import Supervised
    from tools.sandbox_run import prepare

    started = time.monotonic()
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return HookOutput(None, error=f"its workspace cannot be opened ({exc.strerror})")
    err_r, err_w = os.pipe()
    with tempfile.TemporaryFile(prefix="bastion-hook-") as stdin:
        stdin.write(payload)
        stdin.flush()
        stdin.seek(0)
        try:
            prep = prepare(policy, root, ("bash", "-c", command), env)
            try:
                sup = Supervised.spawn(
                    prep.argv, env, spawn_options(dir_fd), prep.entries,
                    stdin=stdin.fileno(), stderr=err_w,
                )  # fmt: skip
            except BaseException:
                prep.cleanup()
                raise
        except OSError as exc:
            os.close(err_r)
            return HookOutput(None, error=f"it could not be started ({exc.strerror or exc})")
        except BaseException:
            os.close(err_r)
            raise
        finally:
            os.close(dir_fd)
            os.close(err_w)
        try:
            return await _supervised(sup, err_r, timeout, started)
        finally:
            sup.close()
            prep.cleanup()  # git control files the hook made dangerous are moved aside
            for moved in prep.git.moved if prep.git is not None and prep.git.moved else ():
                log.warning("hook `%s`: %s", command, moved)


async def _supervised(sup: object, err_r: int, timeout: float, started: float) -> HookOutput:
    from tools.lifetime import Supervised

    assert isinstance(sup, Supervised)
    errors = asyncio.StreamReader(limit=1 << 16)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(errors), os.fdopen(err_r, "rb", buffering=0)
    )
    readers = [asyncio.ensure_future(_drain(sup.output)), asyncio.ensure_future(_drain(errors))]
    try:
        await sup.connect()
        first = await sup.started()
        if "spawn_error" in first or "sandbox_error" in first:
            why = first.get("sandbox_error") or first.get("message") or "it did not start"
            await sup.finished()
            return HookOutput(None, error=f"it could not be started ({why})")
        timed_out = not await sup.exited(timeout)
        if timed_out:
            sup.request(b"T")
        await sup.finished()
        done, _ = await asyncio.wait(readers, timeout=DRAIN_S)
        (out, over), (err, _) = [r.result() if r in done else (b"", False) for r in readers]
    except BaseException:
        sup.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(sup.finished())
        raise
    finally:
        for reader in readers:
            reader.cancel()
        transport.close()
    return HookOutput(
        None if timed_out else sup.exit_code, out, err, timed_out, over,
        duration_ms=int((time.monotonic() - started) * 1000),
    )  # fmt: skip


async def _drain(stream: asyncio.StreamReader) -> tuple[bytes, bool]:
    """Everything `stream` holds, read to its end; kept up to OUTPUT_CAP bytes.
    Returns (the bytes kept, whether there were more)."""
    kept = bytearray()
    over = False
    while chunk := await stream.read(1 << 16):
        room = OUTPUT_CAP - len(kept)
        if len(chunk) > room:
            over = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), over
