"""The egress proxy: the only way out of a sandbox whose network is controlled.

A small HTTP proxy (asyncio, in a thread of the harness) listening on a unix socket that is
bound into the sandbox (the sandbox's relay, :mod:`.relay`, carries its loopback connections
there). It understands two requests and refuses everything else with an answer and a record:

* ``CONNECT host:port HTTP/1.1`` (HTTPS and any TLS): a tunnel, opened after the checks;
* ``GET http://host[:port]/path HTTP/1.1`` (an absolute URI, plain HTTP; any method): forwarded
  as ``GET /path`` with ``Host`` set to the checked authority, ``Connection: close``, and the
  ``Proxy-*`` headers removed.

Checks, in order (:class:`~.allowlist.EgressPolicy`): the request line and headers are
well-formed and bounded (:data:`MAX_LINE`, :data:`MAX_HEADERS`); the host is on the allowlist
for that port; the name resolves (the resolver is injectable, for tests) and an address that
may be reached is found (public, or named with its port by the deployment); the connection goes
to *that* address, so there is no second resolution between check and use (DNS rebinding).

Every refusal is a :class:`Blocked` record with the command that was running
(:attr:`EgressProxy.label`, set by the caller before each command); bytes are counted each way
(:class:`Traffic`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.execution.network.allowlist import (
    AllowlistError,
    EgressPolicy,
    IPAddress,
    ip_literal,
    split_authority,
)

log = logging.getLogger(__name__)

MAX_LINE = 8192
MAX_HEADERS = 100
MAX_HEADER_BYTES = 64 * 1024
MAX_BLOCKED = 500
MAX_CONNECTIONS = 128
READ_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0
CHUNK = 64 * 1024
HOP_HEADERS = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization",
                         "proxy-authenticate", "te", "trailer", "upgrade", "host"})

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of ``host`` from the system resolver (``getaddrinfo``)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Blocked:
    """One refused request: what was asked, why not, and by which command."""

    command: str
    method: str
    host: str
    port: int | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Traffic:
    """Bytes carried each way, and the connections allowed."""

    to_client: int = 0
    to_upstream: int = 0
    connections: int = 0
    by_host: dict[str, int] = field(default_factory=dict)


class Refused(Exception):
    def __init__(self, status: int, reason: str, *, host: str = "", port: int | None = None,
                 method: str = "") -> None:
        super().__init__(reason)
        self.status, self.reason, self.host, self.port, self.method = (
            status, reason, host, port, method)


class EgressProxy:
    """The proxy of one execution's controlled phases; :meth:`start` and :meth:`close`."""

    def __init__(self, policy: EgressPolicy, socket_path: Path, *,
                 resolver: Resolver = system_resolver) -> None:
        self.policy = policy
        self.socket_path = socket_path
        self.resolver = resolver
        self.label = ""
        self.blocked: list[Blocked] = []
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._active = 0

    # -- lifetime (from the harness) ---------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="studio-egress-proxy",
                                        daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            self._server = loop.run_until_complete(asyncio.start_unix_server(
                self._handle, path=str(self.socket_path), limit=MAX_LINE))
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10.0)
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    @property
    def active_connections(self) -> int:
        return self._active

    def snapshot(self) -> tuple[list[Blocked], Traffic]:
        with self._lock:
            return list(self.blocked), Traffic(self.traffic.to_client, self.traffic.to_upstream,
                                               self.traffic.connections,
                                               dict(self.traffic.by_host))

    # -- one connection ----------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        label = self.label
        if self._active >= MAX_CONNECTIONS:
            with contextlib.suppress(OSError, TimeoutError, ValueError):
                # the request is read (not parsed) so that closing does not reset the answer
                await asyncio.wait_for(reader.read(MAX_LINE), 5.0)
            self._refuse(writer, Refused(503, "too many connections at once"), label)
            with contextlib.suppress(OSError, RuntimeError):
                await writer.drain()
                writer.close()
            return
        self._active += 1  # only the proxy's event loop touches it
        try:
            try:
                method, host, port, head = await asyncio.wait_for(_read_request(reader),
                                                                  READ_TIMEOUT_S)
                upstream = await self._open(method, host, port)
            except Refused as refused:
                self._refuse(writer, refused, label)
                return
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ValueError):
                self._refuse(writer, Refused(400, "malformed or incomplete request"), label)
                return
            if head is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                upstream[1].write(head)
            await self._pipe(reader, writer, upstream, host)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._active -= 1
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def _open(self, method: str, host: str, port: int) -> tuple[
            asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.policy.host_allowed(host, port):
            raise Refused(403, "host not on the allowlist", host=host, port=port, method=method)
        address = await self._address(method, host, port)
        try:
            opened = await asyncio.wait_for(asyncio.open_connection(str(address), port),
                                            CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise Refused(502, f"cannot connect: {type(exc).__name__}", host=host, port=port,
                          method=method) from None
        with self._lock:
            self.traffic.connections += 1
        return opened

    async def _address(self, method: str, host: str, port: int) -> IPAddress:
        """The checked address to connect to (resolved once, here)."""
        literal = ip_literal(host)
        if literal is not None:
            candidates: list[IPAddress] = [literal]
        else:
            try:
                found = await asyncio.wait_for(self.resolver(host, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError):
                raise Refused(502, "the name does not resolve", host=host, port=port,
                              method=method) from None
            candidates = [a for a in (ip_literal(text.split("%")[0]) for text in found)
                          if a is not None]
        for address in candidates:
            if self.policy.address_allowed(address, port):
                return address
        raise Refused(403, "resolves only to addresses that may not be reached (loopback, "
                      "private, link-local or metadata)", host=host, port=port, method=method)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                    host: str) -> None:
        up_reader, up_writer = upstream

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       to_client: bool) -> None:
            try:
                while chunk := await src.read(CHUNK):
                    dst.write(chunk)
                    await dst.drain()
                    with self._lock:
                        if to_client:
                            self.traffic.to_client += len(chunk)
                            self.traffic.by_host[host] = (
                                self.traffic.by_host.get(host, 0) + len(chunk))
                        else:
                            self.traffic.to_upstream += len(chunk)
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    if dst.can_write_eof():
                        dst.write_eof()

        try:
            await asyncio.gather(copy(reader, up_writer, False), copy(up_reader, writer, True))
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                up_writer.close()

    def _refuse(self, writer: asyncio.StreamWriter, refused: Refused, label: str) -> None:
        record = Blocked(label, refused.method, refused.host, refused.port, refused.reason)
        with self._lock:
            if len(self.blocked) < MAX_BLOCKED:
                self.blocked.append(record)
        # the command is in the record (journaled, redacted), not in the log: it may carry a
        # credential its author put there
        log.warning("egress proxy refused %s %s:%s (%s)", refused.method or "-",
                    refused.host or "-", refused.port, refused.reason)
        body = f"studio egress proxy: refused: {refused.reason}\n".encode()
        title = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway",
                 503: "Service Unavailable"}.get(refused.status, "Refused")
        with contextlib.suppress(OSError, RuntimeError):
            writer.write(f"HTTP/1.1 {refused.status} {title}\r\nContent-Type: text/plain\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, int, bytes | None]:
    """(method, host, port, the head to send upstream: None for a CONNECT)."""
    line = await reader.readuntil(b"\n")
    method, target, version = parse_request_line(line)
    headers = await read_headers(reader)
    if method == "CONNECT":
        host, port = connect_authority(target)
        return method, host, port, None
    host, port, path = absolute_http_uri(target, method)
    head = [f"{method} {path} {version}", f"Host: {_authority(host, port)}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in headers
             if name.lower() not in HOP_HEADERS and not name.lower().startswith("proxy-")]
    return method, host, port, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


def parse_request_line(line: bytes) -> tuple[str, str, str]:
    """``METHOD TARGET HTTP/1.x`` (bounded, ASCII, three parts); raises :class:`Refused`."""
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise Refused(400, "request line too long")
    try:
        text = line.decode("ascii").rstrip("\r\n")
    except UnicodeDecodeError:
        raise Refused(400, "request line is not ASCII") from None
    parts = text.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[0].isupper() \
            or parts[2] not in ("HTTP/1.0", "HTTP/1.1") or not parts[1]:
        raise Refused(400, "malformed request line")
    if any(ord(c) < 0x21 or ord(c) == 0x7f for c in parts[1]):
        raise Refused(400, "malformed request target")
    return parts[0], parts[1], parts[2]


async def read_headers(reader: asyncio.StreamReader) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\n")
        total += len(line)
        if total > MAX_HEADER_BYTES or len(headers) > MAX_HEADERS:
            raise Refused(400, "too many or too long headers")
        text = line.decode("latin-1").rstrip("\r\n")
        if not text:
            return headers
        name, sep, value = text.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t\r\n"):
            raise Refused(400, "malformed header")
        if "\r" in value or "\x00" in value:
            raise Refused(400, "malformed header")
        headers.append((name, value.strip()))


def connect_authority(target: str) -> tuple[str, int]:
    """The ``host:port`` of a CONNECT (the port is required)."""
    try:
        host, port = split_authority(target)
    except AllowlistError as exc:
        raise Refused(400, str(exc), method="CONNECT") from None
    if port is None:
        raise Refused(400, "CONNECT needs host:port", host=host, method="CONNECT")
    return host, port


def absolute_http_uri(target: str, method: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of ``http://authority/path``; only plain HTTP."""
    if not target.lower().startswith("http://"):
        raise Refused(400, "only CONNECT and absolute http:// requests are served",
                      method=method)
    rest = target[len("http://"):]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0),
              default=len(rest))
    authority, path = rest[:cut], rest[cut:] or "/"
    if path.startswith("?"):
        path = "/" + path
    path = path.split("#", 1)[0]
    try:
        host, port = split_authority(authority)
    except AllowlistError as exc:
        raise Refused(400, str(exc), method=method) from None
    return host, port if port is not None else 80, path


def _authority(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == 80 else f"{shown}:{port}"
