"""The allow-list's entries: what each spelling means, and one clear line for each
thing that is not a host."""

from __future__ import annotations

import pytest

from tools.netrules import (
    DEFAULT_PORTS,
    MAX_ENTRIES,
    BadHost,
    HostRule,
    allowed,
    narrow,
    parse_entry,
    parse_hosts,
    screen,
)


@pytest.fixture
def hot_path() -> str:
    return "either"


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ("pypi.org", HostRule("pypi.org")),
        ("  PyPI.ORG. ", HostRule("pypi.org")),
        ("pypi.org:8443", HostRule("pypi.org", (8443,))),
        ("*.Example.com", HostRule("example.com", wildcard=True)),
        ("*.example.com:8080", HostRule("example.com", (8080,), wildcard=True)),
        ("bücher.de", HostRule("xn--bcher-kva.de")),
        ("BÜCHER.de:81", HostRule("xn--bcher-kva.de", (81,))),
        ("1.2.3.4", HostRule("1.2.3.4", address=True)),
        ("1.2.3.4:5000", HostRule("1.2.3.4", (5000,), address=True)),
        ("[2001:DB8::1]", HostRule("2001:db8::1", address=True)),
        ("[::1]:8080", HostRule("::1", (8080,), address=True)),
        ("::1", HostRule("::1", address=True)),
        ("::ffff:10.0.0.1", HostRule("10.0.0.1", address=True)),
        ("my_host.internal", HostRule("my_host.internal")),
    ],
)
def test_entries_are_normalised(entry: str, rule: HostRule) -> None:
    assert parse_entry(entry) == rule


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("https://pypi.org", "write the host alone"),
        ("pypi.org/simple", "write the host alone"),
        ("user@pypi.org", "write the host alone"),
        ("10.0.0.0/8", "write the host alone"),
        ("*", "whole first label"),
        ("*.com", "two labels or more"),
        ("**.example.com", "whole first label"),
        ("*example.com", "whole first label"),
        ("api.*.example.com", "whole first label"),
        ("*.1.2.3.4", "two labels or more"),
        ("pypi.org:0", "not a port"),
        ("pypi.org:65536", "not a port"),
        ("pypi.org:http", "not a port"),
        ("pypi.org:", "not a port"),
        ("[::1]x", "junk after"),
        ("[pypi.org]", "IPv6 address"),
        ("[::1", "unclosed"),
        ("", "empty"),
        ("a" * 400, "over-long"),
        ("pypi org", "spaces or control"),
        ("pypi.org\x00", "spaces or control"),
        ("-bad-.org", "not a valid host name"),
        ("a..b", "not a valid host name"),
        ("127.1", "partial or odd IP"),
        ("0x7f000001", "partial or odd IP"),
        ("x" * 64 + ".org", "not a valid host name"),
    ],
)
def test_junk_is_refused_in_one_line(entry: str, says: str) -> None:
    with pytest.raises(BadHost) as caught:
        parse_entry(entry)
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_list_names_its_bad_entry() -> None:
    with pytest.raises(BadHost, match=r"'https://x\.org': write the host alone"):
        parse_hosts(["pypi.org", "https://x.org"])
    with pytest.raises(BadHost, match="int: not a string"):
        parse_hosts(["pypi.org", 5])
    with pytest.raises(BadHost, match="array"):
        parse_hosts("pypi.org")
    with pytest.raises(BadHost, match=f"more than {MAX_ENTRIES}"):
        parse_hosts([f"h{i}.org" for i in range(MAX_ENTRIES + 1)])
    assert parse_hosts(["pypi.org", "PYPI.org."]) == (HostRule("pypi.org"),)


def test_matching() -> None:
    rules = parse_hosts(["pypi.org", "*.example.com", "files.host:8080", "10.1.2.3"])
    assert allowed(rules, "pypi.org", 443) and allowed(rules, "pypi.org", 80)
    assert not allowed(rules, "pypi.org", 22)
    assert not allowed(rules, "evil-pypi.org", 443)
    assert not allowed(rules, "pypi.org.evil.com", 443)
    assert allowed(rules, "a.example.com", 443) and allowed(rules, "a.b.example.com", 80)
    assert not allowed(rules, "example.com", 443)
    assert not allowed(rules, "badexample.com", 443)
    assert allowed(rules, "files.host", 8080) and not allowed(rules, "files.host", 443)
    assert allowed(rules, "10.1.2.3", 443) and not allowed(rules, "10.1.2.4", 443)
    assert DEFAULT_PORTS == (80, 443)


def test_a_project_list_only_narrows() -> None:
    user = parse_hosts(["*.example.com", "pypi.org", "files.host:8080"])
    project = parse_hosts(
        [
            "api.example.com",
            "*.example.com",
            "*.deep.example.com",
            "example.com",
            "evil.com",
            "pypi.org:8443",
            "pypi.org",
            "files.host",
            "files.host:8080",
            "1.2.3.4",
        ]
    )
    kept = [str(r) for r in narrow(user, project)]
    assert kept == [
        "api.example.com",
        "*.example.com",
        "*.deep.example.com",
        "pypi.org",
        "files.host:8080",
    ]


def test_addresses_a_name_resolves_to_must_be_public_or_listed() -> None:
    rules = parse_hosts(["pypi.org", "registry.corp", "10.0.0.5"])
    assert screen(rules, "pypi.org", ["151.101.0.223", "2a04:4e42::223"]) == ""
    for private in ("127.0.0.1", "10.9.9.9", "192.168.1.1", "169.254.169.254", "::1", "fe80::1"):
        why = screen(rules, "pypi.org", ["151.101.0.223", private])
        assert "not a public address" in why, private
    assert "127.0.0.1" in screen(rules, "pypi.org", ["::ffff:127.0.0.1"])
    assert screen(rules, "registry.corp", ["10.0.0.5"]) == ""
    assert "not an address" in screen(rules, "pypi.org", ["junk"])
