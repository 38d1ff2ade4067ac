"""The provider key stays in the harness: a per-execution model proxy the agent CLI calls instead.

The CLI is given a base URL on the loopback interface and a random per-execution token as its
"API key" (:attr:`KeyProxy.token`); it never holds the deployment's key, so nothing the model
runs (a shell reading its environment, ``/proc/<pid>/environ`` of the CLI, the CLI's memory) can
find it. Each request the proxy receives:

- must carry the token where the CLI puts its key (``Authorization: Bearer``, ``x-api-key``,
  ``x-goog-api-key`` or the ``key`` query parameter), else ``401``;
- must name a path the CLI's model calls use (:attr:`ModelRoute.paths`, below the base URL),
  else ``403``: the key serves model calls, not the provider's other APIs;
- is forwarded to the provider's real base URL (through the operator's ``HTTPS_PROXY`` when one
  is set) with every credential header the CLI sent removed and the real one added; the reply
  streams back as it arrives (SSE).

The proxy holds no state beyond the token; it stops with the execution. How a connection reaches
it: under bubblewrap the CLI has no network at all (its own network namespace), a relay inside the
sandbox (:mod:`.relay`) accepts on the sandbox's loopback and hands each connection to the harness
over an inherited Unix socket (:meth:`KeyProxy.accept_from`); unconfined (development), the proxy
listens on ``127.0.0.1`` itself (:meth:`KeyProxy.listen`).
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import json
import logging
import re
import secrets
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

import h11

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_HEAD_BYTES = 64 * 1024
CLIENT_IDLE_S = 900.0
UPSTREAM_TIMEOUT_S = 900.0
READ_CHUNK = 64 * 1024

#: Headers a CLI may carry its key in: all removed before forwarding.
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key",
                                "proxy-authorization"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length"})
CREDENTIAL_QUERY = "key"


@dataclass(frozen=True)
class ModelRoute:
    """Where a CLI's model calls go and how the provider reads the credential.

    ``upstream``: the provider's base URL (scheme, host, port, path prefix), as the CLI would
    have used it; ``header``/``value``: the header the provider reads the credential from and its
    value (``Bearer <key>`` or the bare key); ``paths``: regular expressions (full match) of the
    paths below the base URL that the CLI's model calls use.
    """

    upstream: str
    header: str
    value: str
    paths: tuple[str, ...]

    def __repr__(self) -> str:  # the value is the key: never in a log or a traceback
        return f"ModelRoute(upstream={self.upstream!r}, header={self.header!r})"


class KeyProxy:
    """One execution's model proxy (see the module docstring)."""

    def __init__(self, route: ModelRoute, environ: Mapping[str, str]) -> None:
        parts = urlsplit(route.upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the model's base URL must be an http(s) URL with a host")
        self.route = route
        self.token = f"studio-{secrets.token_urlsafe(32)}"
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._paths = tuple(re.compile(p) for p in route.paths)
        self._tls = _tls_context(environ) if parts.scheme == "https" else None
        self._proxy = _upstream_proxy(environ, parts.scheme, self._host)
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    # -- how connections arrive ---------------------------------------------------------------
    def base_url(self, origin: str) -> str:
        """The base URL the CLI is given: ``origin`` (``http://127.0.0.1:PORT``) with the
        provider's path prefix, so the CLI's paths are the provider's."""
        return origin + self._prefix

    def listen(self) -> str:
        """Listen on ``127.0.0.1`` (an ephemeral port); the origin to give the CLI."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        self._track(listener)
        threading.Thread(target=self._accept_loop, args=(listener,), daemon=True,
                         name="studio-keyproxy-accept").start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    def accept_from(self, channel: socket.socket) -> None:
        """Serve every connection whose descriptor arrives on ``channel`` (a Unix socket the
        sandbox's relay sends accepted connections over, ``SCM_RIGHTS``)."""
        self._track(channel)
        threading.Thread(target=self._receive_loop, args=(channel,), daemon=True,
                         name="studio-keyproxy-receive").start()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
            self._sockets.clear()

    def __enter__(self) -> KeyProxy:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            self._serve(conn)

    def _receive_loop(self, channel: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                message, fds, _flags, _address = socket.recv_fds(channel, 16, 4)
            except OSError:
                return
            for fd in fds:
                try:
                    conn = socket.socket(fileno=fd)
                except OSError:
                    with contextlib.suppress(OSError):
                        socket.close(fd)
                    continue
                if conn.family in (socket.AF_INET, socket.AF_INET6) \
                        and conn.type == socket.SOCK_STREAM:
                    self._serve(conn)
                else:
                    conn.close()
            if not message and not fds:
                return  # the relay is gone

    def _serve(self, conn: socket.socket) -> None:
        self._track(conn)
        threading.Thread(target=self._connection, args=(conn,), daemon=True,
                         name="studio-keyproxy-conn").start()

    # -- one client connection -------------------------------------------------------------
    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(CLIENT_IDLE_S)
        h = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            while not self._closed.is_set():
                request = self._request(h, conn)
                if request is None:
                    return
                head, body = request
                if body is None:
                    self._reply(h, conn, 413, {"error": "request body too large"})
                    return
                self._exchange(h, conn, head, body)
                if h.our_state is not h11.DONE or h.their_state is not h11.DONE:
                    return
                h.start_next_cycle()
        except (OSError, h11.ProtocolError, http.client.HTTPException) as exc:
            log.debug("model proxy connection ended: %s", type(exc).__name__)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _events(self, h: h11.Connection, conn: socket.socket) -> Iterator[object]:
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                h.receive_data(conn.recv(READ_CHUNK))
                continue
            yield event

    def _request(self, h: h11.Connection, conn: socket.socket
                 ) -> tuple[h11.Request, bytes | None] | None:
        head: h11.Request | None = None
        chunks: list[bytes] = []
        size = 0
        for event in self._events(h, conn):
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                size += len(event.data)
                if size <= MAX_BODY_BYTES:
                    chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed, or a close before a whole request
                return None
        if head is None:
            return None
        return head, (b"".join(chunks) if size <= MAX_BODY_BYTES else None)

    def _reply(self, h: h11.Connection, conn: socket.socket, status: int,
               payload: dict[str, object]) -> None:
        data = json.dumps(payload).encode()
        conn.sendall(h.send(h11.Response(status_code=status, headers=[
            ("content-type", "application/json"), ("content-length", str(len(data)))])) or b"")
        conn.sendall(h.send(h11.Data(data=data)) or b"")
        conn.sendall(h.send(h11.EndOfMessage()) or b"")

    def _exchange(self, h: h11.Connection, conn: socket.socket, head: h11.Request,
                  body: bytes) -> None:
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in head.headers]
        target = head.target.decode("latin-1")
        path, _, query = target.partition("?")
        params = parse_qsl(query, keep_blank_values=True)
        if not self._authorized(headers, params):
            log.warning("model proxy: a request without this execution's token was refused")
            self._reply(h, conn, 401, {"error": "studio model proxy: unknown credential"})
            return
        if not self._allowed(path):
            log.warning("model proxy: %s %s is not a model call; refused",
                        head.method.decode("latin-1"), path[:200])
            self._reply(h, conn, 403, {"error": "studio model proxy: not a model call"})
            return
        kept = [(k, v) for k, v in params if k != CREDENTIAL_QUERY]
        forward_target = path + (f"?{urlencode(kept)}" if kept else "")
        outgoing = {k: v for k, v in headers
                    if k not in CREDENTIAL_HEADERS and k not in HOP_BY_HOP}
        outgoing[self.route.header] = self.route.value
        upstream = self._connect()
        try:
            try:
                upstream.request(head.method.decode("latin-1"), self._absolute(forward_target),
                                 body=body, headers=outgoing)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                log.warning("model proxy: the model endpoint failed: %s", type(exc).__name__)
                self._reply(h, conn, 502, {"error": "studio model proxy: upstream unreachable"})
                return
            back = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            conn.sendall(h.send(h11.Response(status_code=response.status, headers=back,
                                             reason=response.reason.encode("latin-1",
                                                                           "replace")))
                         or b"")
            while chunk := response.read1(READ_CHUNK):
                conn.sendall(h.send(h11.Data(data=chunk)) or b"")
            conn.sendall(h.send(h11.EndOfMessage()) or b"")
        finally:
            upstream.close()

    def _authorized(self, headers: list[tuple[str, str]], params: list[tuple[str, str]]) -> bool:
        offered = [v for k, v in params if k == CREDENTIAL_QUERY]
        for name, value in headers:
            if name == "authorization" and value[:7].lower() == "bearer ":
                offered.append(value[7:].strip())
            elif name in ("x-api-key", "x-goog-api-key", "api-key"):
                offered.append(value.strip())
        return any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered)

    def _allowed(self, path: str) -> bool:
        if not path.startswith("/") or "%" in path or "\\" in path:
            return False
        if any(segment in (".", "..") for segment in path.split("/")):
            return False
        if self._prefix and not path.startswith(self._prefix + "/"):
            return False
        below = path[len(self._prefix):]
        return any(p.fullmatch(below) for p in self._paths)

    def _connect(self) -> http.client.HTTPConnection:
        proxy = self._proxy
        if self._scheme == "https":
            if proxy is not None:
                conn = http.client.HTTPSConnection(proxy[0], proxy[1], context=self._tls,
                                                   timeout=UPSTREAM_TIMEOUT_S)
                conn.set_tunnel(self._host, self._port)
                return conn
            return http.client.HTTPSConnection(self._host, self._port, context=self._tls,
                                               timeout=UPSTREAM_TIMEOUT_S)
        if proxy is not None:
            return http.client.HTTPConnection(proxy[0], proxy[1], timeout=UPSTREAM_TIMEOUT_S)
        return http.client.HTTPConnection(self._host, self._port, timeout=UPSTREAM_TIMEOUT_S)

    def _absolute(self, target: str) -> str:
        """The request target: the path, or the absolute URL for a plain-HTTP forward proxy."""
        if self._scheme == "http" and self._proxy is not None:
            return f"http://{self._host}:{self._port}{target}"
        return target


def _tls_context(environ: Mapping[str, str]) -> ssl.SSLContext:
    """The system's trust store plus the operator's CA files (``SSL_CERT_FILE``,
    ``SSL_CERT_DIR``, ``NODE_EXTRA_CA_CERTS``)."""
    context = ssl.create_default_context()
    for name in ("SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"):
        if environ.get(name):
            context.load_verify_locations(cafile=environ[name])
    if environ.get("SSL_CERT_DIR"):
        context.load_verify_locations(capath=environ["SSL_CERT_DIR"])
    return context


def _upstream_proxy(environ: Mapping[str, str], scheme: str, host: str
                    ) -> tuple[str, int] | None:
    """The operator's proxy for ``scheme`` (``HTTPS_PROXY``/``HTTP_PROXY``) unless ``NO_PROXY``
    names ``host``."""
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    url = next((environ[n] for n in names if environ.get(n)), "")
    if not url:
        return None
    no_proxy = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if no_proxy and bypass(host, {"no": no_proxy}):
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or 80
