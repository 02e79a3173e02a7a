"""Bastion's allow-list proxy against real loopback servers: CONNECT and plain HTTP,
allowed and refused, oversized and slow heads, many connections at once, and the
system resolver refusing a name that points at the user's own machine."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tools import netproxy
from tools.netproxy import MAX_PER_CHANNEL, Channel, NetProxy
from tools.netrules import parse_hosts


@pytest.fixture
def hot_path() -> str:
    return "either"


class Echo(socketserver.BaseRequestHandler):
    """Echoes bytes; answers an HTTP request head with what it was sent."""

    def handle(self) -> None:
        data = self.request.recv(65536)
        if data.startswith((b"GET ", b"POST ")):
            body = b"seen:" + data
            self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            self.request.sendall(body)
            return
        while data:
            self.request.sendall(data)
            data = self.request.recv(65536)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def upstream() -> Iterator[int]:
    server = Server(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(tmp_path: object, upstream: int) -> Iterator[NetProxy]:
    async def resolve(host: str, port: int) -> list[tuple[str, int]]:
        return [("127.0.0.1", upstream)]

    folder = f"/tmp/bastion-test-proxy-{os.getpid()}-{time.monotonic_ns()}"
    made = NetProxy(parse_hosts(["pypi.org", "*.example.com:8443"]), folder, resolve=resolve)
    yield made
    made.close()
    os.rmdir(folder)


def connect(chan: Channel) -> socket.socket:
    if chan.path:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(chan.path)
    else:
        sock = socket.create_connection(("127.0.0.1", chan.port))
    sock.settimeout(10)
    return sock


def read_all(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def exchange(chan: Channel, request: bytes) -> bytes:
    with connect(chan) as sock:
        sock.sendall(request)
        return read_all(sock)


@pytest.mark.parametrize("tcp", [False, True])
def test_connect_allowed_and_refused(proxy: NetProxy, tcp: bool) -> None:
    chan = proxy.channel(tcp=tcp)
    with connect(chan) as sock:
        sock.sendall(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        sock.sendall(b"hello through the tunnel")
        assert sock.recv(100) == b"hello through the tunnel"
    with connect(chan) as sock:  # tunnelled bytes sent along with the head
        sock.sendall(b"CONNECT api.example.com:8443 HTTP/1.1\r\n\r\nearly")
        got = b""
        while not got.endswith(b"early"):
            got += sock.recv(100)
    for target in (b"evil.com:443", b"pypi.org:22", b"api.example.com:443", b"127.0.0.1:443"):
        answer = exchange(chan, b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 Forbidden"), answer
        assert target + b": not in network_hosts" in answer
    refused = proxy.close_channel(chan)
    assert [r["host"] for r in refused] == [
        "evil.com:443",
        "pypi.org:22",
        "api.example.com:443",
        "127.0.0.1:443",
    ]
    assert not os.path.exists(chan.path) if chan.path else True


def test_plain_http_allowed_and_refused(proxy: NetProxy) -> None:
    chan = proxy.channel()
    answer = exchange(
        chan,
        b"GET http://PyPI.org/simple/?q=1 HTTP/1.1\r\nHost: pypi.org\r\n"
        b"Proxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nAccept: */*\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 200 OK"), answer
    sent = answer.split(b"seen:", 1)[1]
    assert sent.startswith(b"GET /simple/?q=1 HTTP/1.1\r\n")
    assert b"Accept: */*" in sent and b"Connection: close" in sent
    assert b"Proxy-" not in sent
    for request in (
        b"GET http://evil.com/ HTTP/1.1\r\n\r\n",
        b"GET http://pypi.org:8080/ HTTP/1.1\r\n\r\n",
        b"GET http://x.pypi.org/ HTTP/1.1\r\n\r\n",
    ):
        assert exchange(chan, request).startswith(b"HTTP/1.1 403"), request
    for request, status in (
        (b"GET https://pypi.org/ HTTP/1.1\r\n\r\n", b"400"),  # TLS goes by CONNECT
        (b"GET /relative HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://user@pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.org HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT b\xc3\xbccher.de:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"\x16\x03\x01 not http at all\r\n\r\n", b"400"),
        (b"SPDY/3 x y z\r\n\r\n", b"400"),
    ):
        assert exchange(chan, request).startswith(b"HTTP/1.1 " + status), request
    hosts = [r["host"] for r in proxy.close_channel(chan)]
    assert hosts[:3] == ["evil.com:80", "pypi.org:8080", "x.pypi.org:80"]
    assert "user@pypi.org" in hosts  # (a 400 that named a host is listed too)


def test_oversized_and_slow_heads(proxy: NetProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    chan = proxy.channel()
    big = b"GET http://pypi.org/ HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
    with connect(chan) as sock:
        with contextlib.suppress(OSError):  # closed before all was sent: fine
            sock.sendall(big)
        assert read_all(sock).startswith(b"HTTP/1.1 431")
    monkeypatch.setattr(netproxy, "HEAD_TIMEOUT", 0.3)
    with connect(chan) as sock:
        sock.sendall(b"GET http://pypi.org/ HTTP/1.1\r\n")  # and never the rest
        assert read_all(sock).startswith(b"HTTP/1.1 408")
    assert exchange(chan, b"GET http://pypi.org/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200")
    assert proxy.close_channel(chan) == []


def test_many_connections_are_capped_and_released(proxy: NetProxy) -> None:
    chan = proxy.channel()
    socks = []
    for _ in range(MAX_PER_CHANNEL):
        sock = connect(chan)
        sock.sendall(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 200")
        socks.append(sock)
    extra = [connect(chan) for _ in range(20)]
    for sock in extra:
        assert read_all(sock).startswith(b"HTTP/1.1 503"), "over the cap"
        sock.close()
    assert proxy.connections == MAX_PER_CHANNEL
    for sock in socks:
        sock.close()
    deadline = time.monotonic() + 10
    while proxy.connections and time.monotonic() < deadline:
        time.sleep(0.01)  # (poll interval)
    assert proxy.connections == 0
    assert exchange(chan, b"GET http://pypi.org/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200")
    proxy.close_channel(chan)


def test_closing_a_channel_ends_its_tunnels(proxy: NetProxy) -> None:
    chan = proxy.channel()
    sock = connect(chan)
    sock.sendall(b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
    assert sock.recv(100).startswith(b"HTTP/1.1 200")
    proxy.close_channel(chan)
    assert read_all(sock) == b""
    sock.close()


def test_the_system_resolver_refuses_names_of_this_machine(upstream: int) -> None:
    folder = f"/tmp/bastion-test-proxy-{os.getpid()}-{time.monotonic_ns()}"
    rules = parse_hosts([f"localhost:{upstream}", f"127.0.0.1:{upstream}"])
    only_name = NetProxy(rules[:1], folder)
    both = NetProxy(rules, folder + "b")
    try:
        chan = only_name.channel()
        answer = exchange(chan, f"CONNECT localhost:{upstream} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 403") and b"not a public address" in answer
        assert b"127.0.0.1" in answer or b"::1" in answer
        [refused] = only_name.close_channel(chan)
        assert refused["host"] == f"localhost:{upstream}"
        chan = both.channel()  # listed address: allowed, and an IP literal needs no lookup
        for target in (f"127.0.0.1:{upstream}",):
            with connect(chan) as sock:
                sock.sendall(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
                assert sock.recv(100).startswith(b"HTTP/1.1 200")
        both.close_channel(chan)
    finally:
        only_name.close()
        both.close()
        for path in (folder, folder + "b"):
            os.rmdir(path)


def test_the_refusal_record_is_bounded(proxy: NetProxy) -> None:
    chan = proxy.channel()
    for i in range(netproxy.MAX_REFUSED + 10):
        exchange(chan, f"CONNECT h{i}.evil.com:443 HTTP/1.1\r\n\r\n".encode())
    exchange(chan, b"CONNECT h0.evil.com:443 HTTP/1.1\r\n\r\n")
    refused = proxy.close_channel(chan)
    assert len(refused) == netproxy.MAX_REFUSED + 1
    assert refused[0]["times"] == 2
    assert refused[-1] == {"host": "", "why": "10 more refusals", "times": 0}


def test_closing_the_proxy_closes_its_channels(upstream: int) -> None:
    folder = f"/tmp/bastion-test-proxy-{os.getpid()}-{time.monotonic_ns()}"
    proxy = NetProxy(parse_hosts(["pypi.org"]), folder)
    chans = [proxy.channel() for _ in range(3)]
    assert len(os.listdir(folder)) == 3 and proxy.running
    proxy.close()
    assert os.listdir(folder) == [] and not proxy.running
    for chan in chans:
        with pytest.raises(OSError):
            connect(chan)
    os.rmdir(folder)
