"""The egress allowlist: which hosts a sandboxed command may reach through the proxy, and which
addresses a connection may go to.

Entries (``STUDIO_SETUP_ALLOWLIST``, an execution's or a node's ``network_allowlist``):

* ``pypi.org``: exactly that name; ports 80 and 443;
* ``.pythonhosted.org``: any name that *ends* with ``.pythonhosted.org`` at a dot boundary
  (``files.pythonhosted.org``), never the bare name nor ``evilpythonhosted.org``; ports 80, 443;
* ``name:PORT`` / ``.suffix:PORT``: the same, on that port only;
* ``ADDRESS:PORT`` (``127.0.0.1:8080``, ``[::1]:8080``): that address and port, **even when it
  is loopback, private or link-local**. Only the deployment's own list may name an address
  (:func:`parse_allowlist` with ``addresses=False`` refuses them): a request cannot open the
  local PostgreSQL to its commands.

Whatever a name resolves to, the connection goes only to a *public* address
(:func:`public_address`: in no row of :data:`~services.execution.network.refused.
REFUSED_NETWORKS`, the table the repository host rules use too: loopback, private, link-local
(the cloud metadata service ``169.254.169.254`` among them), shared ``100.64.0.0/10``,
site-local ``fec0::/10``, unique local ``fc00::/7``, reserved, multicast, unspecified; an IPv6
address that carries an IPv4 address is judged by what it carries too) or to an address and
port the deployment named itself.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from services.execution.network.refused import refused_network

DEFAULT_PORTS = frozenset({80, 443})
MAX_ENTRIES = 200
MAX_NAME = 253
LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
DEFAULT_ALLOWLIST = ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AllowlistError(ValueError):
    """An allowlist entry (or a request's host) that is not a well-formed host."""


@dataclass(frozen=True)
class HostRule:
    """One name entry: ``name`` exactly, or (``suffix``) any name ending with ``.name``."""

    name: str
    suffix: bool
    port: int | None

    def matches(self, host: str, port: int) -> bool:
        if (port not in DEFAULT_PORTS) if self.port is None else (port != self.port):
            return False
        if self.suffix:
            return host.endswith("." + self.name)
        return host == self.name

    def text(self) -> str:
        name = ("." if self.suffix else "") + self.name
        return name if self.port is None else f"{name}:{self.port}"


@dataclass(frozen=True)
class EgressPolicy:
    """Name rules and the addresses (with their port) the deployment allowed by name."""

    rules: tuple[HostRule, ...] = ()
    pinned: frozenset[tuple[IPAddress, int]] = frozenset()

    def host_allowed(self, host: str, port: int) -> bool:
        """Whether ``host`` (normalized by :func:`parse_host`) may be asked for on ``port``:
        a name by the rules, an address literal only when pinned with that port."""
        address = ip_literal(host)
        if address is not None:
            return (address, port) in self.pinned
        return any(rule.matches(host, port) for rule in self.rules)

    def address_allowed(self, address: IPAddress, port: int) -> bool:
        """Whether a connection may go to ``address``:``port`` (a name's resolution)."""
        address = unwrap(address)
        return (address, port) in self.pinned or public_address(address)

    def merged(self, other: EgressPolicy) -> EgressPolicy:
        rules = self.rules + tuple(r for r in other.rules if r not in self.rules)
        return EgressPolicy(rules, self.pinned | other.pinned)

    def entries(self) -> list[str]:
        pinned = [(f"[{a}]" if a.version == 6 else str(a)) + f":{p}"
                  for a, p in sorted(self.pinned, key=lambda x: (x[0].version, str(x[0]), x[1]))]
        return [r.text() for r in self.rules] + pinned


def unwrap(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address as the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def public_address(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address: no row of the one table of refused
    networks (:data:`~services.execution.network.refused.REFUSED_NETWORKS`) holds it or an IPv4
    address it carries."""
    return refused_network(address) is None


def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (IPv6 without brackets), else None."""
    try:
        return unwrap(ipaddress.ip_address(host))
    except ValueError:
        return None


def parse_port(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 5 or not 0 < int(text) < 65536:
        raise AllowlistError(f"invalid port {text[:20]!r}")
    return int(text)


def parse_host(text: str) -> str:
    """A host name or address literal, normalized (lower case, no trailing dot, IPv6 without
    brackets); refuses anything else (user info, paths, spaces, non-ASCII, empty labels)."""
    if text.startswith("[") and text.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(text[1:-1]))
        except ValueError:
            raise AllowlistError(f"invalid IPv6 address {text[:60]!r}") from None
    host = text.lower()
    if host.endswith("."):
        host = host[:-1]
    literal = ip_literal(host) if ":" not in host else None
    if literal is not None:
        return str(literal)
    if not host or len(host) > MAX_NAME or not host.isascii():
        raise AllowlistError(f"invalid host {text[:60]!r}")
    if not all(LABEL.match(label) for label in host.split(".")):
        raise AllowlistError(f"invalid host {text[:60]!r}")
    if re.fullmatch(r"[0-9.]+", host):
        raise AllowlistError(f"invalid address {text[:60]!r}")  # 127.1, 0x7f are not accepted
    return host


def split_authority(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port``: (host, port or None), validated."""
    if "@" in text or "/" in text or any(c.isspace() for c in text):
        raise AllowlistError(f"invalid host {text[:60]!r}")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise AllowlistError(f"invalid host {text[:60]!r}")
        host, rest = text[:end + 1], text[end + 1:]
        if rest and not rest.startswith(":"):
            raise AllowlistError(f"invalid host {text[:60]!r}")
        return parse_host(host), parse_port(rest[1:]) if rest else None
    if text.count(":") > 1:
        raise AllowlistError(f"an IPv6 address needs brackets: {text[:60]!r}")
    host, _, port = text.partition(":")
    return parse_host(host), parse_port(port) if _ else None


def parse_entry(text: str, *, addresses: bool) -> HostRule | tuple[IPAddress, int]:
    raw = text.strip()
    suffix = raw.startswith(".")
    host, port = split_authority(raw[1:] if suffix else raw)
    address = ip_literal(host)
    if address is not None:
        if suffix:
            raise AllowlistError(f"an address cannot be a suffix: {raw[:60]!r}")
        if not addresses:
            raise AllowlistError(f"only the deployment's allowlist may name an address: "
                                 f"{raw[:60]!r}")
        if port is None:
            raise AllowlistError(f"an address entry needs its port: {raw[:60]!r}")
        return address, port
    if suffix and "." not in host:
        raise AllowlistError(f"a suffix needs at least two labels: {raw[:60]!r}")
    return HostRule(host, suffix, port)


def parse_allowlist(entries: Iterable[str], *, addresses: bool) -> EgressPolicy:
    """The policy of ``entries``; raises :class:`AllowlistError` on the first bad one."""
    listed = list(entries)
    if len(listed) > MAX_ENTRIES:
        raise AllowlistError(f"at most {MAX_ENTRIES} allowlist entries")
    rules: list[HostRule] = []
    pinned: set[tuple[IPAddress, int]] = set()
    for entry in listed:
        if not isinstance(entry, str):
            raise AllowlistError("allowlist entries are strings")
        parsed = parse_entry(entry, addresses=addresses)
        if isinstance(parsed, HostRule):
            if parsed not in rules:
                rules.append(parsed)
        else:
            pinned.add(parsed)
    return EgressPolicy(tuple(rules), frozenset(pinned))
