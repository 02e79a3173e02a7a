"""Bastion's side of the network allow-list: an HTTP proxy that lets sandboxed
commands reach the hosts of ``network_hosts`` (``tools/netrules.py``) and nothing else.

It speaks ``CONNECT host:port`` (HTTPS and anything tunnelled) and plain HTTP with an
absolute URI (``GET http://host/path``, forwarded with ``Connection: close``). It
runs an asyncio loop on a thread of its own, started by the first ``channel()``,
so the harness's loop never carries a command's downloads.

Each command gets a ``Channel``: a Unix socket of its own in a private folder (0700,
one of bastion's, which the walls hide from commands), reached from inside the
command's network namespace only through the bridge its supervisor starts
(``tools/bridge.py``); on macOS a loopback TCP port instead. What a channel refused
is kept per host (bounded) and becomes one line each in the call's result.

Names are resolved here, on bastion's side; an address that is not public is
refused unless it is listed (``netrules.screen``), and the connection goes to the
address that was checked, never to a second lookup. Bounded: a request head is at
most ``MAX_HEAD`` bytes and must arrive within ``HEAD_TIMEOUT``; at most
``MAX_CONNECTIONS`` connections at once (``MAX_PER_CHANNEL`` per command); a tunnel
quiet both ways for ``idle`` seconds is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tools.netrules import (
    NOT_LISTED,
    BadHost,
    HostRule,
    allowed,
    normalise_host,
    screen,
    split_port,
)

MAX_HEAD = 16 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
IDLE_TIMEOUT = 300.0
MAX_CONNECTIONS = 256
MAX_PER_CHANNEL = 64
MAX_REFUSED = 64  # distinct host:port pairs remembered per channel
CHUNK = 64 * 1024

Resolver = Callable[[str, int], Awaitable[list[tuple[str, int]]]]


class Refusal(Exception):
    """A request the proxy will not carry: ``status`` is its HTTP answer, ``target``
    the host:port it named (recorded), ``why`` the reason."""

    def __init__(self, status: int, target: str, why: str) -> None:
        super().__init__(why)
        self.status, self.target, self.why = status, target, why


@dataclass(slots=True)
class Channel:
    """One command's way to the proxy: ``path`` (a Unix socket) or ``port`` (TCP on
    127.0.0.1, macOS). ``refused()`` lists what it refused: (host:port, why, times)."""

    path: str = ""
    port: int = 0
    _refused: dict[str, list[object]] = field(default_factory=dict)
    _dropped: int = 0
    _server: asyncio.AbstractServer | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    def record(self, target: str, why: str) -> None:
        seen = self._refused.get(target)
        if seen is not None:
            seen[1] = int(str(seen[1])) + 1
        elif len(self._refused) < MAX_REFUSED:
            self._refused[target] = [why, 1]
        else:
            self._dropped += 1

    def refused(self) -> list[dict[str, object]]:
        found: list[dict[str, object]] = [
            {"host": target, "why": str(why), "times": times}
            for target, (why, times) in self._refused.items()
        ]
        if self._dropped:
            found.append({"host": "", "why": f"{self._dropped} more refusals", "times": 0})
        return found


class NetProxy:
    """The proxy for allow-list ``rules``; channels' sockets go in ``folder`` (made
    0700). ``resolve(host, port)`` gives the addresses to connect to (tests pass a
    stand-in; the default asks the system and screens the answer)."""

    def __init__(
        self,
        rules: tuple[HostRule, ...],
        folder: str,
        resolve: Resolver | None = None,
        idle: float = IDLE_TIMEOUT,
    ) -> None:
        self.rules = rules
        self.folder = folder
        self.idle = idle
        self._resolve = resolve or self._system_resolve
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._limit: asyncio.Semaphore | None = None
        self._open_channels: list[Channel] = []  # (on the proxy's thread only)
        self.connections = 0  # open now (read on the proxy's thread)

    @property
    def running(self) -> bool:
        return self._loop is not None

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                os.makedirs(self.folder, mode=0o700, exist_ok=True)
                os.chmod(self.folder, 0o700)
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._serve, args=(loop, ready), name="bastion-netproxy", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def _serve(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        self._limit = asyncio.Semaphore(MAX_CONNECTIONS)
        loop.call_soon(ready.set)
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def channel(self, tcp: bool = False) -> Channel:
        """A new channel (the proxy starts with the first): a Unix socket in the
        folder, or with ``tcp`` a port on 127.0.0.1."""
        loop = self._start()
        made = asyncio.run_coroutine_threadsafe(self._open_channel(tcp), loop)
        return made.result(timeout=10)

    async def _open_channel(self, tcp: bool) -> Channel:
        chan = Channel()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._handle(chan, reader, writer)

        if tcp:
            chan._server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=MAX_HEAD)
            chan.port = chan._server.sockets[0].getsockname()[1]
        else:
            chan.path = os.path.join(self.folder, f"p{secrets.token_hex(6)}.sock")
            chan._server = await asyncio.start_unix_server(handle, chan.path, limit=MAX_HEAD)
            os.chmod(chan.path, 0o600)
        self._open_channels.append(chan)
        return chan

    def close_channel(self, chan: Channel) -> list[dict[str, object]]:
        """Stop ``chan`` (its connections closed, its socket removed); what it refused."""
        loop = self._loop
        if loop is not None and chan._server is not None:
            done = asyncio.run_coroutine_threadsafe(self._close_channel(chan), loop)
            with contextlib.suppress(Exception):
                done.result(timeout=10)
        return chan.refused()

    async def _close_channel(self, chan: Channel) -> None:
        server, chan._server = chan._server, None
        if chan in self._open_channels:
            self._open_channels.remove(chan)
        if server is not None:
            server.close()
        for writer in list(chan._open):
            writer.close()
        if chan.path:
            with contextlib.suppress(OSError):
                os.unlink(chan.path)

    def close(self) -> None:
        """Stop the proxy and its thread (every channel with it)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def stop() -> None:
            for chan in list(self._open_channels):
                await self._close_channel(chan)
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)

    # -- one connection -----------------------------------------------------------

    async def _handle(
        self, chan: Channel, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        assert self._limit is not None
        if self._limit.locked() or len(chan._open) >= MAX_PER_CHANNEL:
            await answer(writer, 503, "too many connections through the proxy")
            return
        async with self._limit:
            chan._open.add(writer)
            self.connections += 1
            try:
                await self._serve_one(chan, reader, writer)
            except Refusal as exc:
                if exc.target:
                    chan.record(exc.target, exc.why)
                await answer(writer, exc.status, f"{exc.target or 'request'}: {exc.why}")
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                pass
            finally:
                self.connections -= 1
                chan._open.discard(writer)
                writer.close()

    async def _serve_one(
        self, chan: Channel, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        head = await read_head(reader)
        method, target, version, rest = split_head(head)
        if method == "CONNECT":
            host, port = authority(target)
            upstream = await self._connect(host, port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await self._splice(reader, writer, *upstream)
            return
        host, port, path = absolute_uri(target)
        up_reader, up_writer = await self._connect(host, port)
        up_writer.write(forwarded_head(method, path, version, rest))
        await self._splice(reader, writer, up_reader, up_writer)

    async def _connect(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        shown = show(host, port)
        if not allowed(self.rules, host, port):
            raise Refusal(403, shown, NOT_LISTED)
        try:
            addresses = await asyncio.wait_for(self._resolve(host, port), CONNECT_TIMEOUT)
        except Refusal:
            raise
        except (OSError, TimeoutError) as exc:
            raise Refusal(502, shown, f"could not be resolved ({exc})") from None
        error: Exception | None = None
        for ip, to_port in addresses[:8]:
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(ip, to_port, limit=CHUNK), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError) as exc:
                error = exc
        raise Refusal(502, "", f"{shown} could not be reached ({error or 'no address'})")

    async def _system_resolve(self, host: str, port: int) -> list[tuple[str, int]]:
        if (found := normalise_address(host)) is not None:
            return [(found, port)]  # an address entry: matched above, nothing to look up
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))[:16]
        if why := screen(self.rules, host, addresses):
            raise Refusal(403, show(host, port), why)
        return [(a, port) for a in addresses]

    async def _splice(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """Copy both ways until the far side ends (the command's end of sending only
        half-closes) or nothing moves either way for ``idle`` seconds."""
        moved = [asyncio.get_running_loop().time()]
        # (what the command sent after its head is still in `reader`'s buffer)
        sending = asyncio.ensure_future(self._pump(reader, up_writer, moved))
        try:
            await self._pump(up_reader, writer, moved)  # the far side is done: so are we
        finally:
            sending.cancel()
            up_writer.close()

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, moved: list[float]
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    data = await asyncio.wait_for(src.read(CHUNK), self.idle)
                except TimeoutError:
                    if loop.time() - moved[0] < self.idle:
                        continue  # the other way is busy
                    break
                if not data:
                    break
                moved[0] = loop.time()
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            if dst.can_write_eof():
                with contextlib.suppress(OSError):
                    dst.write_eof()
            else:
                dst.close()


# -- parsing what the command sent ------------------------------------------------


async def read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
    except asyncio.LimitOverrunError:
        raise Refusal(431, "", f"request head over {MAX_HEAD} bytes") from None
    except TimeoutError:
        raise Refusal(408, "", "no request head in time") from None


def split_head(head: bytes) -> tuple[str, str, str, list[bytes]]:
    lines = head.split(b"\r\n")
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (UnicodeDecodeError, ValueError):
        raise Refusal(400, "", "not an HTTP proxy request") from None
    if not version.startswith("HTTP/1.") or not method.isalpha():
        raise Refusal(400, "", "not an HTTP/1 proxy request")
    return method, target, version, [line for line in lines[1:] if line]


def authority(target: str) -> tuple[str, int]:
    """``host:port`` of a CONNECT, normalised; a refusal names it."""
    try:
        host, ports = split_port(target)
        if len(ports) != 1:
            raise BadHost("CONNECT needs host:port")
        return normalise_host(host), ports[0]
    except BadHost as exc:
        raise Refusal(400, shown_raw(target), str(exc)) from None


def absolute_uri(target: str) -> tuple[str, int, str]:
    """Host, port and origin-form path of ``http://host[:port]/path``."""
    if not target.lower().startswith("http://"):
        why = "only CONNECT and http:// absolute URIs go through the proxy"
        raise Refusal(400, "", why)
    rest = target[7:]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    hostport, path = rest[:cut], rest[cut:] or "/"
    if "@" in hostport:
        raise Refusal(400, shown_raw(hostport), "a user in the URI is not carried")
    try:
        host, ports = split_port(hostport)
        port = ports[0] if len(ports) == 1 else 80
        return normalise_host(host), port, path if path.startswith("/") else "/" + path
    except BadHost as exc:
        raise Refusal(400, shown_raw(hostport), str(exc)) from None


HOP = (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")


def forwarded_head(method: str, path: str, version: str, rest: list[bytes]) -> bytes:
    kept = [line for line in rest if line.split(b":", 1)[0].strip().lower() not in HOP]
    first = f"{method} {path} {version}".encode("ascii", "replace")
    return b"\r\n".join([first, *kept, b"Connection: close", b"", b""])


def normalise_address(host: str) -> str | None:
    from tools.netrules import address_of

    found = address_of(host)
    return None if found is None else found.compressed


def show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def shown_raw(text: str) -> str:
    """A host as the command wrote it, made safe to show: printable ASCII, short."""
    safe = "".join(c if 0x21 <= ord(c) < 0x7F else "?" for c in text[:100])
    return safe + ("…" if len(text) > 100 else "")


async def answer(writer: asyncio.StreamWriter, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
              431: "Request Header Fields Too Large", 502: "Bad Gateway",
              503: "Service Unavailable"}.get(status, "Error")  # fmt: skip
    body = f"bastion: {why}\n".encode("utf-8", "replace")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(OSError):
        writer.write(head.encode() + body)
        await asyncio.wait_for(writer.drain(), 5)
    writer.close()


def self_check(rules: tuple[HostRule, ...], folder: str) -> str:
    """Start a proxy for ``rules`` in ``folder``, ask it for a host it must refuse, and
    stop it: '' when it listened and refused, else what went wrong (for doctor)."""
    proxy = NetProxy(rules, folder)
    try:
        chan = proxy.channel()
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(chan.path)
            sock.sendall(b"CONNECT bastion-doctor.invalid:443 HTTP/1.1\r\n\r\n")
            got = sock.recv(64)
        proxy.close_channel(chan)
    except (OSError, TimeoutError) as exc:
        return f"it could not start: {exc}"
    finally:
        proxy.close()
    if not got.startswith(b"HTTP/1.1 403"):
        return f"it answered {got[:40]!r} to a host it must refuse"
    return ""
