"""The app's harness process: started joined by a socket pair, and the few messages
read from it before the event loop exists.

`start_pair` starts `python -P -m MODULE FD` with the workspace kept off its import
path (runtime.ipc.pypath). Before the app's event loop runs, its launcher reads the
child's first reports (the session opened, then driven) with `recv_blocking`, which
reads one JSON line and nothing past it (the rest is the protocol's, read by the
loop later); `send_blocking` writes one. Both ends are this program, over an
unnamed pair the child alone inherits: nothing else could connect to it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from typing import Any

from runtime.model.protocol import MAX_LINE, ProtocolError, line

__all__ = ["end_pair", "recv_blocking", "send_blocking", "start_pair"]


def start_pair(
    module: str, stderr: int, *, keys: bool = True, fds: tuple[int, ...] = ()
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """`python -P -m module FD` joined to this process by a socket pair: the process and
    this end. It inherits its end (as FD) and `fds` alone (the app's attach socket, while
    it wakes a parked harness: runtime.ipc.door), reads nothing from the terminal, and
    runs in a session of its own (a terminal's Ctrl+C or hang-up reaches this one)."""
    from runtime.ipc.pypath import child_environment

    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            # -P and child_environment: the workspace is never on its import path
            [sys.executable, "-P", "-m", module, str(theirs.fileno())],
            env=child_environment(keys=keys),
            pass_fds=(theirs.fileno(), *fds),
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


def send_blocking(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(line(message))


def recv_blocking(sock: socket.socket) -> dict[str, Any]:
    """The next JSON line from a blocking socket, reading nothing past it; EOFError at
    its end, ProtocolError for a line that is not a JSON object."""
    taken = bytearray()
    while True:
        peeked = sock.recv(1 << 16, socket.MSG_PEEK)
        if not peeked:
            raise EOFError
        end = peeked.find(b"\n")
        chunk = sock.recv(end + 1 if end >= 0 else len(peeked))
        taken += chunk
        if end >= 0:
            break
        if len(taken) > MAX_LINE:
            raise ProtocolError(f"a message longer than {MAX_LINE} bytes")
    try:
        message = json.loads(taken)
    except ValueError:
        raise ProtocolError("a line that is not JSON") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message that is not a JSON object")
    return message
