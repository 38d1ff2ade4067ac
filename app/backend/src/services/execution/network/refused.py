"""The one table of networks no request may reach: used by the egress proxy
(:mod:`services.execution.network.allowlist`) and by the repository host rules
(:mod:`services.repos.hosts`).

:data:`REFUSED_NETWORKS` lists each network explicitly, with the kind a refusal reports
(``loopback``, ``link_local``, ``multicast`` or ``private``) and what it is. An address is judged
by :func:`refused_network`:

1. an IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:0:0/96``, 6to4
   ``2002::/16``, NAT64 ``64:ff9b::/96``, Teredo ``2001::/32``) is judged by what it carries as
   well: ``2002:a9fe:a9fe::1`` is the metadata service;
2. the first row of the table that holds the address (or what it carries) refuses it;
3. an IPv6 address outside the global unicast space ``2000::/3`` is refused (``private``,
   unassigned), and so is any address Python's ``ipaddress`` does not call global: a last net,
   never the rule itself (Python 3.11 calls the deprecated site-local ``fec0::/10`` global).

The table is the policy; its rows are tested one by one (``tests/unit/execution/network/
test_refused.py``). An operator opens an internal address explicitly: ``STUDIO_SETUP_ALLOWLIST``
``ADDRESS:PORT`` entries for the proxy, ``STUDIO_REPO_ALLOWED_HOSTS`` for repositories.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Kind = Literal["loopback", "link_local", "multicast", "private"]


@dataclass(frozen=True)
class RefusedNetwork:
    network: Network
    kind: Kind
    what: str


def _row(cidr: str, kind: Kind, what: str) -> RefusedNetwork:
    return RefusedNetwork(ipaddress.ip_network(cidr), kind, what)


REFUSED_NETWORKS: tuple[RefusedNetwork, ...] = (
    # IPv4
    _row("0.0.0.0/8", "private", "this network (0.0.0.0 reaches the machine itself)"),
    _row("10.0.0.0/8", "private", "private (RFC 1918)"),
    _row("100.64.0.0/10", "private", "shared address space (carrier-grade NAT, RFC 6598)"),
    _row("127.0.0.0/8", "loopback", "loopback"),
    _row("169.254.0.0/16", "link_local",
         "link-local (the cloud metadata service 169.254.169.254)"),
    _row("172.16.0.0/12", "private", "private (RFC 1918)"),
    _row("192.0.0.0/24", "private", "IETF protocol assignments"),
    _row("192.0.2.0/24", "private", "documentation (TEST-NET-1)"),
    _row("192.88.99.0/24", "private", "6to4 relay anycast (deprecated)"),
    _row("192.168.0.0/16", "private", "private (RFC 1918)"),
    _row("198.18.0.0/15", "private", "benchmarking"),
    _row("198.51.100.0/24", "private", "documentation (TEST-NET-2)"),
    _row("203.0.113.0/24", "private", "documentation (TEST-NET-3)"),
    _row("224.0.0.0/4", "multicast", "multicast"),
    _row("240.0.0.0/4", "private", "reserved, and the broadcast address 255.255.255.255"),
    # IPv6
    _row("::/128", "private", "unspecified"),
    _row("::1/128", "loopback", "loopback"),
    _row("::/96", "private", "IPv4-compatible (deprecated)"),
    _row("64:ff9b:1::/48", "private", "local-use NAT64 (RFC 8215)"),
    _row("100::/64", "private", "discard-only"),
    _row("2001::/23", "private", "IETF protocol assignments (Teredo, ORCHID, benchmarking)"),
    _row("2001:db8::/32", "private", "documentation"),
    _row("3fff::/20", "private", "documentation (RFC 9637)"),
    _row("5f00::/16", "private", "segment routing (SRv6) identifiers"),
    _row("fc00::/7", "private", "unique local (fd00::/8 among them: AWS metadata fd00:ec2::254)"),
    _row("fe80::/10", "link_local", "link-local"),
    _row("fec0::/10", "private", "site-local (deprecated)"),
    _row("ff00::/8", "multicast", "multicast"),
)

GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_UNASSIGNED = RefusedNetwork(ipaddress.IPv6Network("::/0"), "private",
                             "outside the global unicast space 2000::/3")
_NOT_GLOBAL = RefusedNetwork(ipaddress.IPv6Network("::/0"), "private",
                             "not a global address")


def carried_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, 6to4, NAT64, Teredo server and
    client); none for an IPv4 address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found += list(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def embedded(address: Address) -> list[Address]:
    """``address`` and the IPv4 addresses it carries."""
    return [address, *carried_ipv4(address)]


def _row_of(address: Address) -> RefusedNetwork | None:
    for row in REFUSED_NETWORKS:
        if row.network.version == address.version and address in row.network:
            return row
    return None


def refused_network(address: Address) -> RefusedNetwork | None:
    """The row that refuses ``address`` (see the module docstring), ``None`` for a public one."""
    carried = carried_ipv4(address)
    for candidate in carried:  # what the address carries says most
        row = _row_of(candidate)
        if row is not None:
            return row
    row = _row_of(address)
    if row is not None:
        return row
    if isinstance(address, ipaddress.IPv6Address):
        if address in _MAPPED or address in _NAT64 or address.sixtofour is not None:
            # judged by the IPv4 address it carries, which is not in the table
            return _NOT_GLOBAL if not all(c.is_global for c in carried) else None
        if address not in GLOBAL_UNICAST_V6:
            return _UNASSIGNED
    if not address.is_global:
        return _NOT_GLOBAL
    return None


def refused_kind(address: Address) -> Kind | None:
    """The kind of the row that refuses ``address``, ``None`` for a public address."""
    row = refused_network(address)
    return row.kind if row is not None else None
