"""The harness process `bastion` draws from: `Child` starts it, `main` is its body.

The app runs in one process and the harness (the model loop, its checkpoints,
tools and store) in a child, `python -P -m tui.child FD`, joined by a socket pair
over which it speaks the one protocol (`runtime.model.protocol`): so neither waits
for the other's share of one interpreter lock. The child opens the session the way every front end does
(`tui.session.open_session`, then `drive_session`) and says how each step went;
then it serves the harness to the app until the app closes it, or until the
app's end of the pair closes (the app exited or was killed), when it closes the
harness (leases released, commands ended) and exits.

    child = Child.start(opts, check_model=True)   # opening begins at once
    child.drive()                                  # then it may drive (lease, recovery)
    child.opened.result()                          # BastionError if it cannot be
    client, conversation_id = await child.harness()   # a HarnessClient, the owner

Opening writes nothing; driving does. So the child waits to be told to drive,
and a launch that fails meanwhile (a bad `--theme`) leaves the store as it was.

It runs in a session of its own (a terminal's Ctrl+C or hang-up reaches the app,
never it), reads nothing from the terminal, and writes what it logs to
`<home>/harness.log`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import logging
import os
import socket
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

from runtime import BastionError

if TYPE_CHECKING:
    from runtime import Connection, Door, Parked, ParkingClient

__all__ = ["Child", "main"]

LOG_NAME = "harness.log"
log = logging.getLogger("tui.child")


class Child:
    """The harness process, starting: `opened` and `driven` complete as it reports each
    step (JSON lines on the pair, before the protocol), with its BastionError if one
    fails."""

    def __init__(self, process: subprocess.Popen[bytes], sock: socket.socket) -> None:
        self.process = process
        self.sock = sock
        self.told_to_drive = False
        self.opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.driven: concurrent.futures.Future[str] = concurrent.futures.Future()  # its id
        self._reader = threading.Thread(target=self._read_steps, name="bastion-child", daemon=True)
        self._reader.start()

    @classmethod
    def start(
        cls, opts: Any, *, check_model: bool, parked: Parked | None = None, door: Door | None = None
    ) -> Child:
        """`parked`: the app's parked lease, for it to take back (tui.parking); `door`:
        the app's attach socket, for it to serve (inherited)."""
        from runtime import send_blocking, start_pair

        log = _open_log()
        fds = (door.fileno(),) if door is not None and door.sock is not None else ()
        try:
            process, ours = start_pair("tui.child", stderr=log, fds=fds)
        finally:
            os.close(log)
        # the terminal as it was before the app set it raw (captured as the first one
        # starts: one woken later must not put back the app's raw mode): put back if the
        # app dies; and this process's id: the child may start only after the app was
        # killed, when its own parent is already another (it cannot learn it from getppid)
        opening = {
            "opts": _plain(vars(opts)),
            "check_model": check_model,
            "terminal": _terminal_before(),
            "app": os.getpid(),
            "parked": parked.owner if parked is not None else None,
            "door": [door.conversation_id, fds[0], door.token] if fds and door else None,
        }
        send_blocking(ours, {"open": _plain(opening)})
        return cls(process, ours)

    def drive(self) -> None:
        """Let it drive the session once opened (take its lease, resume its work)."""
        from runtime import send_blocking

        if not self.told_to_drive:
            self.told_to_drive = True
            with contextlib.suppress(OSError):  # it failed to open: `opened` says why
                send_blocking(self.sock, {"drive": True})

    def _read_steps(self) -> None:
        """Read the two step reports (and nothing after them: the rest is the protocol's)."""
        from runtime import HarnessGone, decode_error, recv_blocking

        steps: tuple[tuple[concurrent.futures.Future[Any], str], ...] = (
            (self.opened, "opened"),
            (self.driven, "driven"),
        )
        for future, step in steps:
            try:
                said = recv_blocking(self.sock)
            except (EOFError, OSError, BastionError):
                try:
                    code: int | None = self.process.wait(2)
                except subprocess.TimeoutExpired:
                    code = None
                exit_code = f" (exit {code})" if code is not None else ""
                said = {"failed": None}
                error: BaseException = HarnessGone(
                    f"the harness process ended while opening the session{exit_code}",
                    hint=f"its log is {_log_path()}",
                )
            if "failed" in said:
                if isinstance(said["failed"], dict):
                    error = decode_error(said["failed"])
                for left in (self.opened, self.driven):
                    if not left.done():
                        left.set_exception(error)
                return
            future.set_result(None if step == "opened" else str(said.get(step)))

    async def harness(self) -> tuple[ParkingClient, str]:
        """(the client of its harness, the conversation's id) once the session is driven."""
        from runtime import ParkingClient

        conn, conversation_id = await self.connection()
        client = await ParkingClient.connect(conn, client="app", owner=True, process=self.process)
        return client, conversation_id

    async def connection(self) -> tuple[Connection, str]:
        """(the connection to its harness, before the hello; the conversation's id) once
        the session is driven."""
        import asyncio

        from runtime import Connection

        conversation_id = await asyncio.wrap_future(self.driven)
        await asyncio.to_thread(self._reader.join)
        return await Connection.over(self.sock), conversation_id

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


_TERMINAL: list[Any] = []  # the terminal as the first harness process started


def _terminal_before() -> Any:
    """The terminal's settings as they were when this process first started a harness
    process (before the app set it raw)."""
    if not _TERMINAL:
        from tui.terminal_guard import capture

        _TERMINAL.append(capture())
    return _TERMINAL[0]


def _plain(value: Any) -> Any:
    """`value` as JSON takes it: what argparse and termios give (bytes of a terminal's
    control characters become their numbers), anything else as its text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, bytes) and len(value) == 1:
        return value[0]
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


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
        asked = recv_blocking(sock)["open"]
        opts = argparse.Namespace(**asked["opts"])
        check_model, terminal = bool(asked["check_model"]), asked["terminal"]
        parent = int(asked["app"])
        waking = {"parked": asked.get("parked"), "door": asked.get("door")}
    except (EOFError, OSError, KeyError, TypeError, ValueError, BastionError):
        return 0  # the app quit (or was killed) before asking
    import asyncio

    # The app killed (its terminal left raw): put the terminal back at once, whatever the
    # session is doing (under load, opening it can take seconds more).
    guard = threading.Thread(
        target=_restore_when_orphaned, args=(parent, terminal), daemon=True, name="guard"
    )
    guard.start()
    code, closed = 0, False
    try:
        with contextlib.suppress(ConnectionError, OSError):  # (the app went while opening)
            code, closed = asyncio.run(_serve(sock, opts, check_model, waking))
    finally:  # (whatever ended the session: the guard is a daemon, gone when this returns)
        # the app died (killed): it left its terminal raw. Its socket closes as its
        # files do, a moment before it is reaped and this process handed on; on a
        # loaded machine that moment has taken over half a second, so a connection
        # that ended without a close waits up to 5 s for it. (A kill before driving
        # looks like a close here, so that case is checked too, briefly.)
        if _orphaned(parent, wait=0.05 if closed else 5.0):
            _restore_once(terminal)
    return code


_RESTORED = threading.Event()


def _restore_once(terminal: Any) -> None:
    from tui.terminal_guard import restore

    if not _RESTORED.is_set():
        _RESTORED.set()
        failed = restore(terminal)
        if failed:
            log.warning("the app died; its terminal could not be put back: %s", failed)
        else:
            log.warning("the app died; its terminal was put back as it was")


def _restore_when_orphaned(parent: int, terminal: Any) -> None:
    """Watch for the app's death (this process handed to another parent: only a kill,
    since a quitting app waits for this process to exit) and restore its terminal."""
    _wait_for_parent(parent)
    _restore_once(terminal)


def _wait_for_parent(parent: int) -> None:
    """Return once `parent` has died: blocked on its pidfd where the kernel has them
    (Linux 5.3), waking for nothing else; elsewhere by looking twenty times a second
    (which woke an idle harness process as often, for as long as the app was open)."""
    import select
    import time

    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfds here, or it is gone already
        fd = None
    if fd is not None:
        try:
            if os.getppid() == parent:  # (still ours: not a pid reused after its death)
                select.select([fd], [], [])
        finally:
            os.close(fd)
        return
    while os.getppid() == parent:
        time.sleep(0.05)  # (poll interval)


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


async def _serve(
    sock: socket.socket, opts: Any, check_model: bool, waking: dict[str, Any]
) -> tuple[int, bool]:
    """(exit code, whether the app closed the harness itself). `waking`: the app's parked
    lease to take back and its attach socket to serve, when it wakes this one (both
    None at first: tui.parking)."""
    from runtime import Connection, Listeners, serve_connection
    from tui.session import drive_session, open_session

    conn = await Connection.over(sock)
    try:
        session = await open_session(opts, check_model=check_model)
    except BastionError as exc:  # it closes what it opened when it fails
        return await _failed(conn, exc), True
    session.harness.parked = waking["parked"]
    door = waking["door"]
    if door is not None and isinstance(session.harness.serving, Listeners):
        session.harness.serving.door = (str(door[0]), int(door[1]), str(door[2]))
    try:
        await conn.send({"opened": True})
        if not await _told_to_drive(conn):
            await session.harness.close()
            return 0, True  # the app quit, or failed, before driving: nothing was written
        session = await drive_session(session, interactive=True)
    except BastionError as exc:  # drive_session closes the harness when it fails
        return await _failed(conn, exc), True
    except (ConnectionError, OSError):  # the app was killed while the session opened
        log.info("the app went away while the session was opening")
        await session.harness.close()
        return 0, False
    try:
        await conn.send({"driven": session.conversation.id})
        closed = await serve_connection(session.harness, conn, owner=True)
    except (ConnectionError, OSError):
        closed = False  # the app is gone
    finally:
        await session.harness.close()
    return 0, closed


async def _failed(conn: Connection, exc: BastionError) -> int:
    """Tell the app why the session could not be opened (if it is still there): exit 2."""
    from runtime import encode_error

    try:
        await conn.send({"failed": encode_error(exc)})
    except (ConnectionError, OSError):
        log.info("the app went away before hearing: %s", exc)
    return 2


async def _told_to_drive(conn: Connection) -> bool:
    """Whether the app says to drive (true) or closes its end first (false)."""
    try:
        said = await conn.receive()
    except BastionError:
        return False
    return bool(said and said.get("drive"))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
