"""The one table of refused networks, row by row, through both of its users: the egress proxy's
address check (``EgressPolicy.address_allowed``) and the repository host rules
(``HostPolicy.check``). Each row is tested at its first and last address and through the IPv6
forms that carry an IPv4 address; public addresses next to the rows pass (the control)."""

from __future__ import annotations

import ipaddress

import pytest

from services.execution.errors import ErrorCode
from services.execution.network.allowlist import parse_allowlist, public_address
from services.execution.network.refused import REFUSED_NETWORKS, refused_kind, refused_network
from services.repos.hosts import HostPolicy, RepositoryHostRefused
from services.settings import StudioSettings

PROXY = parse_allowlist(["pypi.org"], addresses=True)
REPOS = HostPolicy.from_settings(StudioSettings(), allow_loopback=False, resolver=lambda _: [])


def _url(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"https://{host}/x/y"


def _refused_by_both(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    assert not public_address(address)
    assert not PROXY.address_allowed(address, 443)
    with pytest.raises(RepositoryHostRefused) as refused:
        REPOS.check(_url(address))
    assert refused.value.code is ErrorCode.HOST_NOT_ALLOWED
    return str(refused.value.details["kind"])


@pytest.mark.parametrize("row", REFUSED_NETWORKS, ids=lambda r: str(r.network))
def test_every_row_is_refused_by_the_proxy_and_the_repository_rules(row: object) -> None:
    network = row.network  # type: ignore[attr-defined]
    for address in (network[0], network[-1]):
        assert refused_network(address) is not None
        assert _refused_by_both(address) == row.kind  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "kind"), [
    ("fec0::1", "private"),                       # site-local: Python calls it global
    ("feff:ffff::1", "private"),
    ("100.64.0.1", "private"), ("100.127.255.254", "private"),
    ("169.254.169.254", "link_local"),            # the metadata service
    ("fd00:ec2::254", "private"),                 # AWS metadata over IPv6
    ("fd00::1", "private"),
    ("::ffff:127.0.0.1", "loopback"),             # IPv4-mapped
    ("::ffff:169.254.169.254", "link_local"),
    ("::ffff:10.1.2.3", "private"),
    ("::127.0.0.1", "private"),                   # IPv4-compatible (deprecated)
    ("::10.0.0.1", "private"),
    ("2002:7f00:1::1", "loopback"),               # 6to4 of 127.0.0.1
    ("2002:a9fe:a9fe::1", "link_local"),          # 6to4 of 169.254.169.254
    ("2002:c0a8:0101::1", "private"),             # 6to4 of 192.168.1.1
    ("64:ff9b::a9fe:a9fe", "link_local"),         # NAT64 of the metadata service
    ("64:ff9b::10.0.0.1", "private"),
    ("64:ff9b:1::8.8.8.8", "private"),            # local-use NAT64
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo
    ("fe80::1", "link_local"), ("ff02::1", "multicast"), ("224.0.0.251", "multicast"),
    ("::", "private"), ("0.0.0.0", "private"), ("::1", "loopback"),
    ("255.255.255.255", "private"),
    ("4000::1", "private"),                       # outside 2000::/3: unassigned
    ("2001:db8::1", "private"),
])
def test_hostile_addresses_are_refused_by_both(text: str, kind: str) -> None:
    address = ipaddress.ip_address(text)
    assert refused_kind(address) == kind
    assert _refused_by_both(address) == kind


@pytest.mark.parametrize("text", [
    "140.82.112.3", "8.8.8.8", "100.63.255.255", "100.128.0.0", "2606:50c0:8000::153",
    "2a04:4e42::223", "::ffff:140.82.112.3", "64:ff9b::140.82.112.3", "2002:8c52:7003::1",
])
def test_public_addresses_pass_both(text: str) -> None:
    address = ipaddress.ip_address(text)
    assert refused_network(address) is None
    assert public_address(address) and PROXY.address_allowed(address, 443)
    REPOS.check(_url(address))


def test_an_operator_can_still_open_a_refused_network() -> None:
    opened = HostPolicy.from_settings(StudioSettings(repo_allowed_hosts=["fec0::/10"]),
                                      allow_loopback=False, resolver=lambda _: [])
    opened.check("https://[fec0::1]/x/y")
    pinned = parse_allowlist(["[fec0::1]:8080"], addresses=True)
    assert pinned.address_allowed(ipaddress.ip_address("fec0::1"), 8080)
    assert not pinned.address_allowed(ipaddress.ip_address("fec0::1"), 8081)
