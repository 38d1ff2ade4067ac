"""The egress allowlist with hostile values: dot-boundary suffixes, ports, IP literals, IPv6,
user info, metadata and private addresses."""

from __future__ import annotations

import ipaddress

import pytest

from services.execution.network.allowlist import (
    AllowlistError,
    parse_allowlist,
    public_address,
    split_authority,
)

POLICY = parse_allowlist(["pypi.org", ".pythonhosted.org", "registry.npmjs.org:8443",
                          "127.0.0.1:8080", "[::1]:9000"], addresses=True)


@pytest.mark.parametrize(("host", "port", "allowed"), [
    ("pypi.org", 443, True),
    ("pypi.org", 80, True),
    ("pypi.org", 22, False),
    ("evilpypi.org", 443, False),
    ("pypi.org.evil.com", 443, False),
    ("sub.pypi.org", 443, False),           # exact entry: no subdomains
    ("files.pythonhosted.org", 443, True),
    ("a.b.pythonhosted.org", 443, True),
    ("pythonhosted.org", 443, False),       # a suffix entry is not the bare name
    ("evilpythonhosted.org", 443, False),
    ("registry.npmjs.org", 443, False),     # that entry names its port
    ("registry.npmjs.org", 8443, True),
    ("127.0.0.1", 8080, True),
    ("127.0.0.1", 6379, False),
    ("127.0.0.1", 5432, False),
    ("::1", 9000, True),
    ("::1", 8080, False),
    ("169.254.169.254", 80, False),
    ("8.8.8.8", 443, False),                # an address literal only when pinned
])
def test_host_matching(host: str, port: int, allowed: bool) -> None:
    assert POLICY.host_allowed(host, port) is allowed


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
    "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::1",
    "64:ff9b::7f00:1", "240.0.0.1",
])
def test_non_public_addresses_are_refused(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert not public_address(ip)
    assert not POLICY.address_allowed(ip, 443)


def test_public_and_pinned_addresses_are_allowed() -> None:
    assert public_address(ipaddress.ip_address("151.101.0.223"))
    assert public_address(ipaddress.ip_address("2a04:4e42::223"))
    assert POLICY.address_allowed(ipaddress.ip_address("127.0.0.1"), 8080)
    assert POLICY.address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"), 8080)
    assert not POLICY.address_allowed(ipaddress.ip_address("127.0.0.1"), 8081)


@pytest.mark.parametrize("text", [
    "user@pypi.org:443", "pypi.org:0", "pypi.org:65536", "pypi.org:-1", "pypi.org:+443",
    "pypi.org:443:443", "pypi.org:４４３", "pypi.org/path", "pypi .org", "", ":443",
    "::1:443", "[::1", "[::1]x", "[not-v6]:443", "pypi..org", "-pypi.org", "p\u00e9pi.org",
    "a" * 64 + ".org", ("a." * 130) + "org", "pypi.org:99999999999999999999",
    "127.1:80", "pypi.org\r\nHost: evil", "pypi.org\x00",
])
def test_hostile_authorities_are_refused(text: str) -> None:
    with pytest.raises(AllowlistError):
        split_authority(text)


def test_authorities_are_normalized() -> None:
    assert split_authority("PyPI.ORG.:443") == ("pypi.org", 443)
    assert split_authority("[::FFFF:7f00:1]:80") == ("::ffff:7f00:1", 80)
    assert split_authority("files.pythonhosted.org") == ("files.pythonhosted.org", None)


@pytest.mark.parametrize("entry", [
    "127.0.0.1", ".127.0.0.1:80", ".org", "pypi.org:abc", "user@host", "http://pypi.org",
])
def test_bad_entries_are_refused(entry: str) -> None:
    with pytest.raises(AllowlistError):
        parse_allowlist([entry], addresses=True)


def test_only_the_deployment_may_name_an_address() -> None:
    with pytest.raises(AllowlistError, match="deployment"):
        parse_allowlist(["127.0.0.1:5432"], addresses=False)
    with pytest.raises(AllowlistError, match="deployment"):
        parse_allowlist(["[::1]:6379"], addresses=False)
    assert parse_allowlist(["example.org"], addresses=False).entries() == ["example.org"]


def test_too_many_entries_are_refused() -> None:
    with pytest.raises(AllowlistError):
        parse_allowlist([f"h{i}.org" for i in range(201)], addresses=False)
