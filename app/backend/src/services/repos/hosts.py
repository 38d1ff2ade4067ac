"""Which network hosts a repository URL may reach: no internal address unless allowed.

A repository URL comes from whoever creates an execution, and the executor connects to it, so an
https URL naming an internal address would be a (blind) request forgery from the executor: the
cloud metadata service (``169.254.169.254``), a private network (``10.0.0.1``), the machine
itself. :class:`HostPolicy` refuses a host that is, or resolves to, a loopback, private,
link-local, shared, reserved, unspecified or multicast address, and the metadata host names
(``metadata.google.internal``), unless ``STUDIO_REPO_ALLOWED_HOSTS`` lists it (a name, an
address or a CIDR network). What is internal is the one table the egress proxy uses too,
:data:`~services.execution.network.refused.REFUSED_NETWORKS` (site-local ``fec0::/10`` and
shared ``100.64.0.0/10`` among its rows), not Python's ``is_global`` alone. Addresses
hidden in other spellings are unpacked first: the numeric IPv4 forms ``inet_aton`` accepts
(``2852039166``, ``0xa9fea9fe``, ``0251.0376.0251.0376``), IPv4-mapped, 6to4, Teredo and
NAT64 IPv6 addresses.

Loopback is allowed without the setting only for executions created from the CLI (the operator's
own machine, from which local paths are accepted anyway); an execution created through the HTTP
API (or a flowchart) needs the setting for ``127.0.0.1`` too.

The check runs when the execution is created and again right before every git network
operation (:mod:`services.repos.origins` calls :meth:`HostPolicy.check_connect`), which resolves
the name again and pins git to the addresses it checked (``http.curloptResolve``), so the name
cannot answer differently for git a moment later. A name that does not resolve is let through
at creation (there is nothing to reach); at connection time it is ``git_error``, as git would
say. A refusal is ``host_not_allowed``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from services.execution.errors import ConfigError, ErrorCode, ExecutionError, ToolFailure
from services.execution.network.refused import embedded, refused_kind
from services.settings import StudioSettings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], list[str]]

SETTING = "STUDIO_REPO_ALLOWED_HOSTS"
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata",
                            "instance-data", "instance-data.ec2.internal"})
_NUMERIC_V4 = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$")


@dataclass(frozen=True)
class _Verdict:
    """What :meth:`HostPolicy._inspect` found: the host, the addresses checked (``resolved``:
    they came from the resolver) and the refusal, if any."""

    host: str | None = None
    addresses: tuple[Address, ...] = ()
    resolved: bool = False
    refusal: tuple[str, dict[str, object]] | None = None


class RepositoryHostRefused(ExecutionError):
    """A repository host that resolves to an internal address."""

    default_code = ErrorCode.HOST_NOT_ALLOWED


def resolve(host: str) -> list[str]:
    """The addresses ``host`` resolves to (empty when it does not resolve)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]).split("%")[0] for info in found]


def literal_address(host: str) -> Address | None:
    """``host`` as an address when it is one, in any spelling git's resolver accepts."""
    text = host.strip("[]").split("%")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if _NUMERIC_V4.match(text.lower()):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def internal_kind(address: Address) -> str | None:
    """Why ``address`` is internal (``loopback``, ``link_local``, ``multicast``, ``private``:
    the kind of its row in the one table of refused networks,
    :data:`~services.execution.network.refused.REFUSED_NETWORKS`), or ``None`` for a public
    address."""
    return refused_kind(address)


def _parse_entries(entries: Iterable[str]) -> tuple[frozenset[str], tuple[Network, ...]]:
    names: set[str] = set()
    networks: list[Network] = []
    for raw in entries:
        entry = raw.strip().lower()
        try:
            if "/" in entry:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            address = literal_address(entry)
        except ValueError:
            raise ConfigError(f"{SETTING}: {raw!r} is not a host, an address or a network",
                              details={"setting": SETTING}) from None
        if address is not None:
            networks.append(ipaddress.ip_network(address))
        elif entry and re.fullmatch(r"[a-z0-9._-]+", entry):
            names.add(entry)
        else:
            raise ConfigError(f"{SETTING}: {raw!r} is not a host, an address or a network",
                              details={"setting": SETTING})
    return frozenset(names), tuple(networks)


@dataclass(frozen=True)
class HostPolicy:
    """The hosts a repository URL may name (see the module docstring)."""

    allowed_names: frozenset[str] = frozenset()
    allowed_networks: tuple[Network, ...] = ()
    allow_loopback: bool = False
    resolver: Resolver = field(default=resolve, compare=False)

    @classmethod
    def from_settings(cls, settings: StudioSettings, *, allow_loopback: bool,
                      resolver: Resolver = resolve) -> HostPolicy:
        names, networks = _parse_entries(settings.repo_allowed_hosts)
        return cls(names, networks, allow_loopback, resolver)

    def _allowed(self, address: Address, kind: str) -> bool:
        if kind == "loopback" and self.allow_loopback:
            return True
        return any(candidate in network for candidate in embedded(address)
                   for network in self.allowed_networks if candidate.version == network.version)

    def _inspect(self, url: str) -> _Verdict:
        try:
            host = urlsplit(url).hostname
        except ValueError:
            return _Verdict()  # not a URL (a local path): nothing to reach
        if not host or host in self.allowed_names:
            return _Verdict()
        if host.rstrip(".") in METADATA_NAMES:
            return _Verdict(host, refusal=self._message(host, "metadata", None))
        literal = literal_address(host)
        addresses = [literal] if literal is not None else self._resolved(host)
        for address in addresses:
            kind = internal_kind(address)
            if kind is not None and not self._allowed(address, kind):
                return _Verdict(host, refusal=self._message(host, kind, address))
        return _Verdict(host, tuple(addresses), resolved=literal is None)

    def refusal(self, url: str) -> tuple[str, dict[str, object]] | None:
        """Why ``url``'s host may not be reached (message and details), or ``None``."""
        return self._inspect(url).refusal

    def _resolved(self, host: str) -> list[Address]:
        found: list[Address] = []
        for text in self.resolver(host):
            try:
                found.append(ipaddress.ip_address(text))
            except ValueError:
                continue
        return found

    def _message(self, host: str, kind: str,
                 address: Address | None) -> tuple[str, dict[str, object]]:
        shown = f" ({address})" if address is not None and str(address) != host else ""
        message = (f"the repository host {host}{shown} is a {kind.replace('_', '-')} address; "
                   f"list it in {SETTING} to allow it")
        details: dict[str, object] = {"host": host, "kind": kind, "setting": SETTING}
        if address is not None:
            details["address"] = str(address)
        return message, details

    def check(self, url: str) -> None:
        """Raise :class:`RepositoryHostRefused` when ``url``'s host may not be reached."""
        found = self.refusal(url)
        if found is not None:
            raise RepositoryHostRefused(found[0], details=found[1])

    def check_connect(self, url: str) -> str | None:
        """The same check right before a git network operation, resolving the name again; a
        refusal is a ``ToolFailure`` the tool call (or the finalizer) reports. Returns the
        ``host:port:addresses`` entry (libcurl's resolve format, git's ``http.curloptResolve``)
        that pins git to the addresses just checked, so a name cannot answer differently
        between the check and git's own lookup; ``None`` for a literal address, an allowed
        name or a local path."""
        verdict = self._inspect(url)
        if verdict.refusal is not None:
            raise ToolFailure(ErrorCode.HOST_NOT_ALLOWED, verdict.refusal[0],
                              details=verdict.refusal[1])
        if verdict.host is None or not verdict.resolved:
            return None
        if not verdict.addresses:
            raise ToolFailure(ErrorCode.GIT_ERROR, f"the repository host {verdict.host} does "
                              "not resolve", details={"host": verdict.host})
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        unique = dict.fromkeys(f"[{a}]" if a.version == 6 else str(a) for a in verdict.addresses)
        return f"{verdict.host}:{port}:{','.join(unique)}"
