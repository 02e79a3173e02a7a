"""The harness process `bastion` draws from: `Child` starts it, `main` is its body.

The app runs in one process and the harness (the model loop, its checkpoints,
tools and store) in a child, `python -m tui.child FD`, joined by a socket pair
(`runtime.ipc.remote`): so neither waits for the other's share of one interpreter
lock. The child opens the session the way every front end does
(`tui.session.open_session`, then `drive_session`) and says how each step went;
then it serves the harness to the app until the app closes it, or until the
app's end of the pair closes (the app exited or was killed), when it closes the
harness (leases released, commands ended) and exits.

    child = Child.start(opts, check_model=True)   # opening begins at once
    child.drive()                                  # then it may drive (lease, recovery)
    child.opened.result()                          # BastionError if it cannot be
    harness, conversation_id = await child.harness()

Opening writes nothing; driving does. So the child waits to be told to drive,
and a launch that fails meanwhile (a bad `--theme`) leaves the store as it was.

It runs in a session of its own (a terminal's Ctrl+C or hang-up reaches the app,
never it), reads nothing from the terminal, and writes what it logs to
`<home>/harness.log`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

__all__ = ["Child", "main"]

LOG_NAME = "harness.log"
log = logging.getLogger("tui.child")


class Child:
    """The harness process, starting: `opened` and `driven` complete as it reports each
    step, with its BastionError if one fails."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.process = process
        self.sock = sock
        self.told_to_drive = False
        self.opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        # the conversation's id, its session settings and its view
        self.driven: concurrent.futures.Future[tuple[str, Any, Any]] = concurrent.futures.Future()
        self._reader = threading.Thread(target=self._read_steps, name="bastion-child", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, opts: Any, *, check_model: bool) -> Child:
        from runtime import send_blocking, start_pair

        log = _open_log()
        try:
            process, ours = start_pair("tui.child", stderr=log)
        finally:
            os.close(log)
        from tui.terminal_guard import capture

        # the terminal as it is before the app sets it raw: put back if the app dies
        send_blocking(ours, ("open", opts, check_model, capture()))
        return cls(process, ours)

    def drive(self) -> None:
        """Let it drive the session once opened (take its lease, resume its work)."""
        from runtime import send_blocking

        if not self.told_to_drive:
            self.told_to_drive = True
            with contextlib.suppress(OSError):  # it failed to open: `opened` says why
                send_blocking(self.sock, ("drive",))

    def _read_steps(self) -> None:
        """Read the two step reports (and nothing after them: the rest is the app's)."""
        from runtime import HarnessGone, recv_blocking

        for future in (self.opened, self.driven):
            try:
                kind, value = recv_blocking(self.sock)
            except (EOFError, OSError):
                try:
                    code: int | None = self.process.wait(2)
                except subprocess.TimeoutExpired:
                    code = None
                exit_code = f" (exit {code})" if code is not None else ""
                value = HarnessGone(
                    f"the harness process ended while opening the session{exit_code}",
                    hint=f"its log is {_log_path()}",
                )
                kind = "failed"
            if kind == "failed":
                for left in (self.opened, self.driven):
                    if not left.done():
                        left.set_exception(value)
                return
            future.set_result(value)

    async def harness(self) -> tuple[Any, str]:
        """(a RemoteHarness, the conversation's id) once the session is driven."""
        import asyncio

        from runtime import RemoteHarness

        opening = await asyncio.wrap_future(self.driven)
        self._reader.join()
        harness = await RemoteHarness.connect(self.sock, self.process, opening=opening)
        return harness, opening[0]

    def close(self, timeout: float = 30.0) -> BaseException | None:
        """End a child the app never took: its error if opening failed, else None once
        it closed the session (end of file tells it to) and exited."""
        error: BaseException | None = None
        try:  # (one never told to drive ends once opened, as the socket closes)
            (self.driven if self.told_to_drive else self.opened).result(timeout)
        except concurrent.futures.TimeoutError:
            pass
        except BaseException as exc:
            error = exc
        from runtime import end_pair

        end_pair(self.sock, self.process, timeout)  # the reader may wait in recv still
        return error


def _log_path() -> str:
    from runtime import default_home

    return str(default_home() / LOG_NAME)


def _open_log() -> int:
    """`<home>/harness.log`, for appending: the child's stderr (the terminal is the app's)."""
    path = _log_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def main(argv: list[str]) -> int:
    """The child: open and drive the session the parent asks for, then serve it."""
    from runtime import harden_process, recv_blocking

    harden_process()  # its environment came with the keys: out of /proc/<pid>/environ
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(name)s: %(message)s"
    )
    sock = socket.socket(fileno=int(argv[1]))
    try:
        _, opts, check_model, terminal = recv_blocking(sock)
    except (EOFError, OSError):
        return 0  # the app quit (or was killed) before asking
    import asyncio

    parent = os.getppid()
    code, closed = 0, False
    with contextlib.suppress(ConnectionError, OSError):  # (the app went away while opening)
        code, closed = asyncio.run(_serve(sock, opts, check_model))
    if not closed and _orphaned(parent):  # the app died (killed): it left its terminal raw
        from tui.terminal_guard import restore

        restore(terminal)
    return code


def _orphaned(parent: int, wait: float = 0.5) -> bool:
    """Whether the app that started this process has died (this one is another's child
    now). Its socket closes as it exits, a moment before this process is handed on."""
    import time

    deadline = time.monotonic() + wait
    while os.getppid() == parent:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def _serve(sock: socket.socket, opts: Any, check_model: bool) -> tuple[int, bool]:
    """(exit code, whether the app closed the harness itself)."""
    import asyncio

    from runtime import serve, write_frame
    from runtime.model.errors import BastionError
    from runtime.model.views import OPENING_ENTRIES
    from tui.session import drive_session, open_session

    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        session = await open_session(opts, check_model=check_model)
    except BastionError as exc:  # it closes what it opened when it fails
        return await _failed(writer, exc), True
    try:
        await write_frame(writer, ("opened", None))
        if not await _told_to_drive(reader):
            await session.harness.close()
            return 0, True  # the app quit, or failed, before driving: nothing was written
        session = await drive_session(session, interactive=True)
    except BastionError as exc:  # drive_session closes the harness when it fails
        return await _failed(writer, exc), True
    except (ConnectionError, OSError):  # the app was killed while the session opened
        log.info("the app went away while the session was opening")
        await session.harness.close()
        return 0, False
    try:
        # What the app asks first, sent with the session: its settings and view, taken
        # after a subscription (served as FIRST) so that nothing falls between.
        harness, conv_id = session.harness, session.conversation.id
        first = harness.subscribe(conv_id)
        settings, view = await asyncio.gather(
            harness.session_settings(conv_id), harness.snapshot(conv_id, last=OPENING_ENTRIES)
        )
        await write_frame(writer, ("driven", (conv_id, settings, view)))
        closed = await serve(harness, reader, writer, first=first)
    except (ConnectionError, OSError):
        closed = False  # the app is gone
    finally:
        await session.harness.close()
    return 0, closed


async def _failed(writer: asyncio.StreamWriter, exc: BaseException) -> int:
    """Tell the app why the session could not be opened (if it is still there): exit 2."""
    from runtime import sendable_error, write_frame

    try:
        await write_frame(writer, ("failed", sendable_error(exc)))
    except (ConnectionError, OSError):
        log.info("the app went away before hearing: %s", exc)
    return 2


async def _told_to_drive(reader: asyncio.StreamReader) -> bool:
    """Whether the app says to drive (true) or closes its end first (false)."""
    from runtime import read_frame

    try:
        return bool(await read_frame(reader) == ("drive",))
    except (EOFError, ConnectionError, OSError):
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv))
