"""Who may use a driving process's socket: the user, not what bastion itself runs.

A conversation's socket (`runtime.ipc.listen`) reads the whole transcript and takes
prompts and approvals. Every process of the user could connect to it (the 0700
folder and the SO_PEERCRED uid check keep other users out), and a command or hook
bastion runs is a process of the user. So a connection is accepted only when

1. its first line carries the socket's **token**: random, written by the server to
   a 0600 file beside the socket (`<socket>.token`, in the 0700 folder) when it
   starts serving, and read by `bastion attach`, a client the user started. A
   sandboxed command never sees that folder (the sandbox hides bastion's home);
2. the peer is **not a descendant of a process bastion started for a command**:
   its ancestry (through /proc) must include neither this serving process (its
   commands, hooks and MCP servers are its descendants) nor any command supervisor
   (`tools/reaper.py`, a child subreaper: whatever a command starts stays below it,
   daemons included). The peer is pinned by a pidfd where the kernel gives one
   (`SO_PEERPIDFD`), so a connector that exits cannot pass its pid to another
   process; elsewhere the peer must still be alive when its ancestry is checked.

Following a session needs the token too: the transcript is as private as the store.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import socket
import struct
from pathlib import Path
from typing import Final

from runtime.model.errors import BastionError

__all__ = [
    "PeerRefused",
    "TokenFile",
    "check_ancestry",
    "peer_identity",
    "read_token",
    "token_matches",
    "token_path",
]

SO_PEERPIDFD: Final = 77  # Linux 6.5+
MAX_DEPTH: Final = 256  # ancestors walked before giving up (refused)


class PeerRefused(BastionError):
    """A process that may not use the socket connected (another user, a process bastion
    started for a command, or one without the session's token)."""

    code = "peer_refused"


def token_path(sock: Path) -> Path:
    return sock.with_name(sock.name + ".token")


class TokenFile:
    """The server's token, written 0600 beside its socket; removed when it stops."""

    def __init__(self, sock: Path) -> None:
        self.path = token_path(sock)
        self.token = secrets.token_hex(32)
        self._identity: tuple[int, int] | None = None

    def write(self) -> None:
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, self.token.encode())
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:  # not a newer server's
                os.unlink(self.path)


def read_token(sock: Path) -> str | None:
    """The token of the server on `sock`; None if it cannot be read (no server)."""
    try:
        fd = os.open(token_path(sock), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return os.read(fd, 256).decode("ascii", "replace").strip() or None
    finally:
        os.close(fd)


def token_matches(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


# --- the peer's process ----------------------------------------------------------


def peer_identity(sock: socket.socket) -> tuple[int | None, int | None, int | None]:
    """(pid, uid, pidfd) of the peer: the pidfd pins the very process that connected
    (None where the kernel has no SO_PEERPIDFD); the caller closes it."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None, None, None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    pidfd: int | None = None
    with contextlib.suppress(OSError):
        pidfd = struct.unpack("i", sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))[0]
    return int(pid), int(uid), pidfd


def _alive(pid: int, pidfd: int | None) -> bool:
    if pidfd is not None:
        try:
            import signal

            signal.pidfd_send_signal(pidfd, 0)
            return True
        except ProcessLookupError:
            return False
        except OSError:
            pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[1])


def _is_supervisor(pid: int, script: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return os.fsencode(script) in argv


def check_ancestry(pid: int | None, pidfd: int | None, supervisor: str, own: int) -> None:
    """Refuse (PeerRefused) a peer that descends from this process (`own`) or from a
    command supervisor (argv naming `supervisor`), or whose ancestry cannot be read.
    Without /proc (not Linux) there is nothing to walk, and the token alone decides."""
    if pid is None or not os.path.isdir("/proc"):
        return
    seen = 0
    current: int | None = pid
    while current is not None and current > 1 and seen < MAX_DEPTH:
        below_own = current == own and current != pid  # (bastion itself may connect)
        if below_own or (current != pid and _is_supervisor(current, supervisor)):
            raise PeerRefused(
                "a process bastion started (a command, a hook or a server) tried to use the "
                "session's socket",
                hint="only the user's own `bastion attach` may follow or act on a session",
            )
        current = _parent(current)
        seen += 1
    if current is None or seen >= MAX_DEPTH or not _alive(pid, pidfd):
        raise PeerRefused(
            "the process that connected could not be identified (it exited, or its "
            "ancestry could not be read)",
            hint="attach again from a terminal of your own",
        )
