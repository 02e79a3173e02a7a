"""Where an MCP server's own words go: its stderr and the SDK's log, never the terminal.

A stdio server's stderr is a pipe bastion reads (a thread per server) into
`<home>/mcp/NAME.log` (0600, in the 0700 home): the first LOG_CAP bytes are
kept, then one line saying the rest is not, so a server that floods its stderr
cannot fill the disk. The last TAIL bytes are kept in memory whatever the
cap, for the line quoted when the server fails.

The SDK logs what it cannot read from a server (with a traceback) on its
`mcp` logger; in print mode and `--plain` the harness shares the terminal, where
that would land. Those records go to `<home>/mcp/sdk.log` instead (rotated at
LOG_CAP); the call that waited on the unreadable reply is ended by the
connection itself (`runtime.mcp.client`).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import threading
from pathlib import Path

__all__ = ["LOG_CAP", "ErrLog", "keep_sdk_log"]

LOG_CAP = 1024 * 1024  # bytes of one server's stderr kept per start
TAIL = 4096  # bytes of its end kept in memory, for the line quoted on a failure
_CHUNK = 65536
CAPPED = f"\n[bastion: this server's stderr past its first {LOG_CAP:,} bytes is not kept]\n"


class ErrLog:
    """A server's stderr: `fileno()` is the pipe end the server writes (stdio_client's
    `errlog`); `started()` once the process holds it; `last_line()` for a failure."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        keep = os.O_APPEND if append else os.O_TRUNC
        flags = os.O_WRONLY | os.O_CREAT | keep | os.O_NOFOLLOW | os.O_CLOEXEC
        self._file = os.open(path, flags, 0o600)
        self._read, self._write = os.pipe()  # (not inherited: PEP 446)
        self._tail = b""
        self._thread = threading.Thread(target=self._drain, name=f"mcp {path.stem} stderr")
        self._thread.daemon = True  # (a server's grandchild may hold the pipe open)
        self._thread.start()

    def fileno(self) -> int:
        """The write end, for the server process's stderr."""
        return self._write

    def started(self) -> None:
        """The process has its own copy now (or was never made): close bastion's, so the
        pipe ends when the server's does."""
        write, self._write = self._write, -1
        if write >= 0:
            os.close(write)

    close = started

    def drained(self, timeout: float) -> None:
        """Block until everything the server wrote is read (its pipe ended), or `timeout`
        seconds: a server that just died has its last words in `last_line` then."""
        self._thread.join(timeout)

    def last_line(self) -> str:
        """The last non-empty line the server wrote on stderr (200 characters at most)."""
        lines = self._tail.decode("utf-8", "replace").splitlines()
        return next((line.strip()[:200] for line in reversed(lines) if line.strip()), "")

    def _drain(self) -> None:
        kept = 0
        try:
            while chunk := os.read(self._read, _CHUNK):
                self._tail = (self._tail + chunk)[-TAIL:]
                if kept >= LOG_CAP:
                    continue
                kept += _write_all(self._file, chunk[: LOG_CAP - kept])
                if kept >= LOG_CAP:  # said once, when it happens (not at the end: none may come)
                    _write_all(self._file, CAPPED.encode())
        except OSError:
            pass  # the log cannot be written (disk full): the server goes on regardless
        finally:
            os.close(self._read)
            os.close(self._file)


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


_SDK_HANDLER = "bastion-mcp-sdk-log"


class _SdkLog(logging.handlers.RotatingFileHandler):
    """The SDK's records in a file; one that cannot be written is dropped (logging's
    default would print a traceback on stderr: the terminal this keeps them off)."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


def keep_sdk_log(log_dir: Path) -> None:
    """Send the SDK's log records to `log_dir/sdk.log` (once per process), not stderr."""
    logger = logging.getLogger("mcp")
    if any(handler.get_name() == _SDK_HANDLER for handler in logger.handlers):
        return
    with contextlib.suppress(OSError):
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = _SdkLog(
        log_dir / "sdk.log", maxBytes=LOG_CAP, backupCount=1, encoding="utf-8", delay=True
    )
    handler.set_name(_SDK_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
