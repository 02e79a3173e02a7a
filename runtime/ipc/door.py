"""Where a conversation's attach socket lives, and the `Door`: that socket held open by
the app while its harness process is parked (tui.parking).

A parked harness process has exited, but `bastion attach ID` must still reach the
session. So the app binds the socket's path itself (0600 in its 0700 folder, the
harness's token written beside it as before) and listens, never accepting: it only
watches for a connection waiting, and then starts the harness process again with
this listening socket (`fileno`, inherited), which accepts it and checks it as every
attach socket does (runtime.ipc.peer: the peer's uid and ancestry, the token). The
app never reads from nor answers on it. It closes the door (socket and token file
removed, unless a newer server's) when it leaves or drives another conversation.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import tempfile
from pathlib import Path
from typing import Final

from runtime.ipc.peer import TokenFile
from runtime.model.errors import BastionError

__all__ = ["MAX_PATH", "Door", "SocketUnsafe", "private_dir", "socket_path"]

MAX_PATH: Final = 107  # bytes of a Unix socket path (sun_path is 108, NUL included)
BACKLOG: Final = 16  # connections waiting while the harness process starts


class SocketUnsafe(BastionError):
    """The socket's directory is not private to this user (another owner, open mode)."""

    code = "socket_unsafe"


# --- where the socket lives ------------------------------------------------------


def socket_path(home: Path, conversation_id: str) -> Path:
    """The socket of `conversation_id` for the store in `home` (the same in every process)."""
    preferred = home.absolute() / "sockets" / f"{conversation_id}.sock"
    if len(os.fsencode(preferred)) <= MAX_PATH:
        return preferred
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    digest = hashlib.sha256(os.fsencode(home.absolute())).hexdigest()[:16]
    short = Path(base) / f"bastion-{os.getuid()}" / digest / f"{conversation_id}.sock"
    if len(os.fsencode(short)) <= MAX_PATH:
        return short
    return Path("/tmp") / f"bastion-{os.getuid()}" / digest / f"{conversation_id}.sock"


def private_dir(path: Path) -> None:
    """Make `path` (and missing parents) a directory only this user can enter: created
    0700, or an existing one checked (ours, not a symlink) and tightened to 0700."""
    from runtime.store.home import private_folder

    hint = "remove it (or set XDG_RUNTIME_DIR to a private directory) and start again"
    # The `bastion-UID` parent first: a link planted there is refused before anything
    # is made through it.
    for directory in (path.parent, path) if path.parent.name.startswith("bastion-") else (path,):
        private_folder(str(directory), lambda message: SocketUnsafe(message, hint=hint))


# --- the door ----------------------------------------------------------------------


class Door:
    """A conversation's attach socket, bound and listening in this process (the app) for
    a harness process it starts to serve (see the module)."""

    def __init__(self, home: Path, conversation_id: str, token: str) -> None:
        self.conversation_id = conversation_id
        self.path = socket_path(home, conversation_id)
        self.token = token
        self.sock: socket.socket | None = None
        self._identity: tuple[int, int] | None = None
        self._token = TokenFile(self.path)
        self._token.token = token

    def open(self) -> None:
        """Bind the path (a socket left there is replaced: the harness that served it has
        parked or died) and listen; write the token beside it. OSError or SocketUnsafe
        when it cannot be (the session then cannot be attached while parked)."""
        private_dir(self.path.parent)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)  # the 0700 directory guards it until now
            sock.listen(BACKLOG)
            sock.setblocking(False)
            self._token.write()
        except BaseException:
            sock.close()
            raise
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)
        self.sock = sock

    def fileno(self) -> int:
        assert self.sock is not None
        return self.sock.fileno()

    def close(self) -> None:
        """Stop listening; remove the socket and token file unless a newer server's."""
        sock, self.sock = self.sock, None
        if sock is None:
            return
        sock.close()
        self._token.remove()
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:
                os.unlink(self.path)
