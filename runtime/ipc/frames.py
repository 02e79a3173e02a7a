"""Frames between the app and its harness process: a 4-byte length and a pickle.

Kept apart from `runtime.ipc.remote` (which imports the event channel, events and
views) so that `bastion` can start its harness process and read its first reports
before its first frame without loading any of those.

Both ends are this program, over an unnamed socket pair the child alone inherits:
nothing another process or user could connect to ever reads a frame.
"""

from __future__ import annotations

import contextlib
import copyreg
import pickle
import socket
import struct
import subprocess
import sys
import types
from typing import TYPE_CHECKING, Any, Final

from runtime.model.errors import BastionError, HarnessGone

if TYPE_CHECKING:  # (asyncio loads with the event loop: `bastion` starts its harness first)
    import asyncio

__all__ = [
    "HarnessGone",
    "end_pair",
    "frame",
    "read_frame",
    "recv_blocking",
    "send_blocking",
    "sendable_error",
    "start_pair",
    "write_frame",
]

HEADER: Final = struct.Struct("!I")


def _read_only(items: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(items)


# Views hold read-only dicts (MappingProxyType), which pickle cannot take as they are.
copyreg.pickle(types.MappingProxyType, lambda m: (_read_only, (dict(m),)))


def frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


async def write_frame(writer: asyncio.StreamWriter, obj: Any) -> None:
    writer.write(frame(obj))
    await writer.drain()


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's object; EOFError at end of file."""
    import asyncio

    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        raise EOFError from None


def send_blocking(sock: socket.socket, obj: Any) -> None:
    sock.sendall(frame(obj))


def recv_blocking(sock: socket.socket) -> Any:
    """The next frame from a blocking socket, reading nothing past it; EOFError at end."""

    def exactly(size: int) -> bytes:
        chunks, left = [], size
        while left:
            chunk = sock.recv(left)
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (size,) = HEADER.unpack(exactly(HEADER.size))
    return pickle.loads(exactly(size))


def sendable_error(exc: BaseException) -> BaseException:
    """`exc` if it comes back whole from a pickle, else a BastionError saying the same."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        hint = exc.hint if isinstance(exc, BastionError) else None
        message = exc.message if isinstance(exc, BastionError) else f"{type(exc).__name__}: {exc}"
        return BastionError(message, hint=hint)


def start_pair(
    module: str, stderr: int, *, keys: bool = True
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """`python -P -m module FD` joined to this process by a socket pair: the process and
    this end. It inherits its end alone (as FD), reads nothing from the terminal, and
    runs in a session of its own (a terminal's Ctrl+C or hang-up reaches this one)."""
    from runtime.ipc.pypath import child_environment

    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            # -P and child_environment: the workspace is never on its import path
            [sys.executable, "-P", "-m", module, str(theirs.fileno())],
            env=child_environment(keys=keys),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return process, ours


def end_pair(sock: socket.socket, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Close this end of a pair (shut down, not just closed: a thread may still wait in
    recv on it, and a socket closed under a waiting recv sends no end of file, so the
    process at the other end would wait too), then reap that process, killed if it
    has not exited within `timeout` seconds."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
