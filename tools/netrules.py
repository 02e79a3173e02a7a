"""The network allow-list of the command sandbox: which hosts a sandboxed command may
reach through bastion's proxy (``tools/netproxy.py``), parsed and matched.

An entry is one of

- ``pypi.org``: that name, on ports 80 and 443;
- ``*.example.com``: any name below example.com (not example.com itself), on 80 and
  443; the wildcard is a whole first label, with at least two labels after it;
- ``1.2.3.4`` or ``[2001:db8::1]`` (or ``2001:db8::1``): that address, on 80 and 443;
- any of these with ``:PORT``: that port only.

Names are compared in their ASCII form: an IDN name is turned to punycode (Python's
``idna`` codec, IDNA 2003), case is folded and a trailing dot dropped. A scheme, a
path, a user, a CIDR range or a wildcard anywhere else is refused with a line
saying why. The list holds at most ``MAX_ENTRIES`` entries of at most
``MAX_ENTRY`` characters.

A request is matched the same way: its host normalised (an IP literal only matches
an IP entry, never a name), its port among the entry's. A name that resolves to an
address that is not public (loopback, private, link-local, …) is refused unless
that address is itself an entry (``screen``), so a DNS answer cannot point a command
at the user's own services.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

DEFAULT_PORTS = (80, 443)
NOT_LISTED = "not in network_hosts"  # why the proxy refuses a host not in the list
MAX_ENTRIES = 256
MAX_ENTRY = 300
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BadHost(ValueError):
    """An entry (or a requested host) that is not a host the list can hold."""


@dataclass(frozen=True, slots=True)
class HostRule:
    """One entry: ``host`` (ASCII, lower case; an address in its compressed form),
    whether it is a ``*.`` wildcard, an IP address, and its ports."""

    host: str
    ports: tuple[int, ...] = DEFAULT_PORTS
    wildcard: bool = False
    address: bool = False

    def matches(self, host: str, port: int) -> bool:
        """Whether normalised ``host`` on ``port`` is allowed by this entry."""
        if port not in self.ports:
            return False
        if self.wildcard:
            return host.endswith("." + self.host) and not is_address(host)
        return host == self.host

    def covers(self, other: HostRule) -> bool:
        """Whether every host and port ``other`` allows, this entry allows too."""
        if not set(other.ports) <= set(self.ports):
            return False
        if self.wildcard:
            return not other.address and (
                other.host.endswith("." + self.host) or (other.wildcard and other.host == self.host)
            )
        return not other.wildcard and other.host == self.host

    def __str__(self) -> str:
        host = f"*.{self.host}" if self.wildcard else self.host
        if self.address and ":" in host:
            host = f"[{host}]"
        return host if self.ports == DEFAULT_PORTS else f"{host}:{self.ports[0]}"


def is_address(host: str) -> bool:
    return address_of(host) is not None


def address_of(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def normalise_host(raw: str) -> str:
    """``raw`` as the list compares hosts: an IP address compressed, a name in ASCII
    (punycode), lower case, without a trailing dot. BadHost says why it is no host."""
    if not raw or len(raw) > MAX_ENTRY:
        raise BadHost("an empty or over-long host")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in raw):
        raise BadHost("a host with spaces or control characters")
    found = address_of(raw)
    if found is not None:
        if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
            found = found.ipv4_mapped  # ::ffff:1.2.3.4 is 1.2.3.4
        return found.compressed
    name = raw.rstrip(".") if raw.endswith(".") and not raw.endswith("..") else raw
    try:
        ascii_name = name.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise BadHost("not a valid host name (IDNA)") from None
    labels = ascii_name.split(".")
    if len(ascii_name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise BadHost("not a valid host name")
    if re.fullmatch(r"[0-9.]+", ascii_name) or ascii_name.startswith("0x"):
        raise BadHost("not a valid host name (a partial or odd IP address)")
    return ascii_name


def parse_entry(entry: str) -> HostRule:
    """One allow-list entry as a HostRule; BadHost says what is wrong with it."""
    if not isinstance(entry, str):
        raise BadHost("not a string")
    text = entry.strip()
    if not text or len(text) > MAX_ENTRY:
        raise BadHost("an empty or over-long entry")
    if "://" in text or "/" in text or "@" in text:
        raise BadHost("write the host alone (no scheme, path, user or CIDR range)")
    host, ports = split_port(text)
    wildcard = host.startswith("*.")
    if wildcard:
        host = host[2:]
    if "*" in host:
        raise BadHost("a wildcard is only allowed as a whole first label (*.example.com)")
    name = normalise_host(host)
    address = is_address(name)
    if wildcard and (address or name.count(".") < 1):
        raise BadHost("a wildcard needs a domain of two labels or more (*.example.com)")
    return HostRule(name, ports, wildcard, address)


def split_port(text: str) -> tuple[str, tuple[int, ...]]:
    """``host[:port]`` (``[v6]:port`` for an IPv6 address) as the host and its ports."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise BadHost("an unclosed [ in an IPv6 address")
        host, rest = text[1:close], text[close + 1 :]
        if not is_address(host):
            raise BadHost("[…] must hold an IPv6 address")
        if not rest:
            return host, DEFAULT_PORTS
        if not rest.startswith(":"):
            raise BadHost("junk after the IPv6 address")
        return host, (port_of(rest[1:]),)
    if text.count(":") > 1:  # a bare IPv6 address: no port
        return text, DEFAULT_PORTS
    host, sep, port = text.partition(":")
    return host, ((port_of(port),) if sep else DEFAULT_PORTS)


def port_of(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536 or len(text) > 5:
        raise BadHost(f"{text[:20]!r} is not a port (1-65535)")
    return int(text)


def parse_hosts(entries: object) -> tuple[HostRule, ...]:
    """The allow-list of ``entries`` (a list of strings), duplicates dropped. BadHost
    names the first bad entry and why."""
    if not isinstance(entries, list | tuple):
        raise BadHost("must be an array of host names")
    if len(entries) > MAX_ENTRIES:
        raise BadHost(f"holds more than {MAX_ENTRIES} entries")
    rules: dict[HostRule, None] = {}
    for entry in entries:
        try:
            rules[parse_entry(entry)] = None
        except BadHost as exc:
            shown = repr(entry)[:80] if isinstance(entry, str) else type(entry).__name__
            raise BadHost(f"{shown}: {exc}") from None
    return tuple(rules)


def narrow(user: tuple[HostRule, ...], project: tuple[HostRule, ...]) -> tuple[HostRule, ...]:
    """The project's entries that the user's list covers: a project may only narrow."""
    return tuple(p for p in project if any(u.covers(p) for u in user))


def allowed(rules: tuple[HostRule, ...], host: str, port: int) -> bool:
    return any(rule.matches(host, port) for rule in rules)


def screen(rules: tuple[HostRule, ...], host: str, addresses: list[str]) -> str:
    """'' if a command may be connected to ``addresses`` (what ``host`` resolved to),
    else why not: an address that is not public must be an entry itself."""
    listed = {r.host for r in rules if r.address}
    for text in addresses:
        found = address_of(text)
        if found is None:
            return f"{host} resolved to {text[:60]!r}, which is not an address"
        if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
            found = found.ipv4_mapped
        if not found.is_global and found.compressed not in listed:
            return (
                f"{host} resolves to {found.compressed}, which is not a public address "
                "(list that address too to allow it)"
            )
    return ""
