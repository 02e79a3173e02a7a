"""The command's end of the network allow-list: inside the command's own network
namespace, a small process that listens on ``127.0.0.1:PORT`` and carries each
connection to bastion's proxy (``tools/netproxy.py``) over its Unix socket.

Loaded by path by ``tools/landlock.py`` in the command supervisor (standard library
only, like it). The sandbox opens the proxy's socket as an ``O_PATH`` descriptor
before the walls hide bastion's folders (``open_target``), then, in the new
namespaces, brings up ``lo`` and forks the bridge (``start``) before Landlock
applies: the bridge reaches the proxy through ``/proc/self/fd/N`` and nothing else,
and the command reaches the bridge's port and nothing else (no other interface
exists in its namespace; with Landlock ABI 4, TCP connect is allowed to that port
only). The command's proxy variables name the port.

The bridge ends when its lifeline pipe from the supervisor closes, when the
supervisor dies (``PR_SET_PDEATHSIG``), and with the command's PID namespace. It
holds at most ``MAX_PAIRS`` connections, and at most ``CHUNK`` bytes in flight
each way of each.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import select
import signal
import socket
import struct

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_SET_PDEATHSIG = 1
MAX_PAIRS = 64
CHUNK = 64 * 1024
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def open_target(path: str) -> int:
    """The proxy's socket as an O_PATH descriptor (taken before the walls hide it)."""
    return os.open(path, os.O_PATH | os.O_CLOEXEC)


def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        got = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack("16sh14x", b"lo", 0))
        flags = struct.unpack("16sh14x", got)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | IFF_UP))


def start(target: int) -> tuple[int, int, int]:
    """Bring ``lo`` up, listen, fork the bridge. Returns its pid, the port, and the
    descriptor whose closing ends it. ``target`` is closed here (the bridge keeps it)."""
    loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    hold_r, hold_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 0
        try:
            os.close(hold_w)
            run(listener, target, hold_r)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(hold_r)
    os.close(target)
    listener.close()
    return pid, port, hold_w


def run(listener: socket.socket, target: int, hold: int) -> None:  # pragma: no cover
    """The bridge's loop (in the child)."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return  # the supervisor died before the line above
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    keep = sorted((listener.fileno(), target, hold))
    low = 3
    for fd in keep:
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    listener.setblocking(False)
    Bridge(listener, f"/proc/self/fd/{target}", hold).loop()


class Pair:
    """One connection: the command's end and the proxy's, with what is in flight."""

    __slots__ = ("ends", "eof", "pending")

    def __init__(self, inner: socket.socket, outer: socket.socket) -> None:
        self.ends = (inner, outer)
        self.pending = [bytearray(), bytearray()]  # to send to ends[0], to ends[1]
        self.eof = [False, False]  # ends[i] sent end-of-file


class Bridge:
    def __init__(self, listener: socket.socket, target: str, hold: int) -> None:
        self.listener, self.target, self.hold = listener, target, hold
        self.pairs: list[Pair] = []

    def loop(self) -> None:
        while True:
            poller = select.poll()
            poller.register(self.hold, select.POLLIN)
            if len(self.pairs) < MAX_PAIRS:
                poller.register(self.listener, select.POLLIN)
            owners: dict[int, tuple[Pair, int]] = {}
            for pair in self.pairs:
                for i in (0, 1):
                    mask = 0
                    if not pair.eof[i] and len(pair.pending[1 - i]) < CHUNK:
                        mask |= select.POLLIN
                    if pair.pending[i]:
                        mask |= select.POLLOUT
                    if mask:  # (none: an end that hung up would wake us for ever)
                        fd = pair.ends[i].fileno()
                        poller.register(fd, mask)
                        owners[fd] = (pair, i)
            for fd, event in poller.poll():
                if fd == self.hold:
                    return  # the supervisor closed the lifeline (or died)
                if fd == self.listener.fileno():
                    self.accept()
                elif fd in owners:
                    self.move(*owners[fd], event)
            self.pairs = [p for p in self.pairs if not self.done(p)]

    def accept(self) -> None:
        try:
            inner, _ = self.listener.accept()
        except OSError:
            return
        outer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            outer.settimeout(5)
            outer.connect(self.target)
        except OSError:
            inner.close()
            outer.close()
            return
        inner.setblocking(False)
        outer.setblocking(False)
        self.pairs.append(Pair(inner, outer))

    def move(self, pair: Pair, i: int, event: int) -> None:
        end, other = pair.ends[i], 1 - i
        try:
            if event & select.POLLOUT and pair.pending[i]:
                sent = end.send(pair.pending[i])
                del pair.pending[i][:sent]
                if not pair.pending[i] and pair.eof[other]:
                    end.shutdown(socket.SHUT_WR)
            if event & (select.POLLIN | select.POLLHUP) and not pair.eof[i]:
                data = end.recv(CHUNK)
                if data:
                    pair.pending[other] += data
                else:
                    pair.eof[i] = True
                    if not pair.pending[other]:
                        pair.ends[other].shutdown(socket.SHUT_WR)
            if event & (select.POLLERR | select.POLLNVAL):
                pair.eof = [True, True]
                pair.pending = [bytearray(), bytearray()]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pair.eof = [True, True]
            pair.pending = [bytearray(), bytearray()]

    @staticmethod
    def done(pair: Pair) -> bool:
        if all(pair.eof) and not any(pair.pending):
            for end in pair.ends:
                end.close()
            return True
        return False
