"""The egress proxy, spoken to over its unix socket with hostile requests: refusals answer and
are recorded with the command, allowed names resolve once and connect to the checked address,
and bytes are counted."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.execution.network.allowlist import parse_allowlist
from services.execution.network.proxy import MAX_CONNECTIONS, MAX_LINE, EgressProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        data = self.request.recv(65536)
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\n"
                             + (b"seen" if data else b"none"))


@pytest.fixture
def upstream() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


class Resolver:
    """Stands for DNS: names to addresses, and how often each was asked."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError("no such name")
        return self.table[host]


@pytest.fixture
def resolver() -> Resolver:
    return Resolver({"index.test": ["127.0.0.1"], "localhost": ["127.0.0.1", "::1"],
                     "metadata.test": ["169.254.169.254"],
                     "mixed.test": ["10.0.0.1", "::ffff:127.0.0.1"]})


@pytest.fixture
def proxy(tmp_path: Path, upstream: int, resolver: Resolver) -> Iterator[EgressProxy]:
    policy = parse_allowlist([f"127.0.0.1:{upstream}", f"index.test:{upstream}",
                              "metadata.test", "localhost:6379", f"mixed.test:{upstream}",
                              "pypi.org"], addresses=True)
    running = EgressProxy(policy, tmp_path / "proxy.sock", resolver=resolver)
    running.label = "pip install thing"
    running.start()
    yield running
    running.close()


def _ask(proxy: EgressProxy, raw: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(60)
        client.connect(str(proxy.socket_path))
        client.sendall(raw)
        client.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := client.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_connect_to_a_pinned_address_tunnels_and_counts(proxy: EgressProxy,
                                                         upstream: int) -> None:
    answer = _ask(proxy, f"CONNECT 127.0.0.1:{upstream} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
                  .encode())
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
    assert answer.endswith(b"seen")
    blocked, traffic = proxy.snapshot()
    assert blocked == [] and traffic.connections == 1 and traffic.to_client > 0


def test_absolute_uri_is_forwarded_in_origin_form(proxy: EgressProxy, upstream: int) -> None:
    answer = _ask(proxy, f"GET http://index.test:{upstream}/simple/x/ HTTP/1.1\r\n"
                  f"Proxy-Authorization: Basic c2VjcmV0\r\nAccept: */*\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"seen")


def test_an_allowed_name_is_resolved_once_and_its_checked_address_used(
        proxy: EgressProxy, upstream: int, resolver: Resolver) -> None:
    answer = _ask(proxy, f"CONNECT index.test:{upstream} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 200")
    assert resolver.asked == ["index.test"]


@pytest.mark.parametrize(("request_line", "host", "reason"), [
    ("CONNECT 127.0.0.1:6379 HTTP/1.1", "127.0.0.1", "not on the allowlist"),   # local Redis
    ("CONNECT 127.0.0.1:5432 HTTP/1.1", "127.0.0.1", "not on the allowlist"),   # PostgreSQL
    ("CONNECT localhost:6379 HTTP/1.1", "localhost", "loopback"),      # allowed name -> loopback
    ("CONNECT metadata.test:80 HTTP/1.1", "metadata.test", "metadata"),  # -> 169.254.169.254
    ("CONNECT 169.254.169.254:80 HTTP/1.1", "169.254.169.254", "not on the allowlist"),
    ("CONNECT [::1]:6379 HTTP/1.1", "::1", "not on the allowlist"),
    ("CONNECT evilpypi.org:443 HTTP/1.1", "evilpypi.org", "not on the allowlist"),
    ("CONNECT pypi.org.evil.com:443 HTTP/1.1", "pypi.org.evil.com", "not on the allowlist"),
    ("CONNECT pypi.org:22 HTTP/1.1", "pypi.org", "not on the allowlist"),
    ("GET http://169.254.169.254/latest/meta-data/ HTTP/1.1", "169.254.169.254",
     "not on the allowlist"),
])
def test_refusals_answer_403_and_are_recorded_with_the_command(
        proxy: EgressProxy, upstream: int, request_line: str, host: str, reason: str) -> None:
    answer = _ask(proxy, (request_line.format(up=upstream) + "\r\n\r\n").encode())
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    blocked, traffic = proxy.snapshot()
    assert [(b.host, b.command) for b in blocked] == [(host, "pip install thing")]
    assert reason in blocked[0].reason
    assert traffic.connections == 0


def test_a_mapped_loopback_answer_reaches_only_the_pinned_port(
        proxy: EgressProxy, upstream: int) -> None:
    # mixed.test answers 10.0.0.1 (private) and ::ffff:127.0.0.1: the second is the pinned
    # address, reached on the pinned port only
    assert _ask(proxy, f"CONNECT mixed.test:{upstream} HTTP/1.1\r\n\r\n".encode()).startswith(
        b"HTTP/1.1 200")


@pytest.mark.parametrize("raw", [
    b"CONNECT user:pw@pypi.org:443 HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org:0 HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org:443 HTTP/2.0\r\n\r\n",
    b"CONNECT  pypi.org:443 HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org:443\r\n\r\n",
    b"connect pypi.org:443 HTTP/1.1\r\n\r\n",
    b"GET https://pypi.org/ HTTP/1.1\r\n\r\n",
    b"GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
    b"GET http://user@pypi.org/ HTTP/1.1\r\n\r\n",
    b"GET http://[::1/ HTTP/1.1\r\n\r\n",
    b"CONNECT \xc3\xa9.org:443 HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org:443 HTTP/1.1\r\nBad Header\r\n\r\n",
    b"CONNECT pypi.org:443 HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n",
    b"CONNECT " + b"a" * (MAX_LINE + 10) + b":443 HTTP/1.1\r\n\r\n",
    b"CONNECT pypi.org:443 HTTP/1.1",          # never ends
    b"\r\n\r\n",
])
def test_malformed_requests_are_refused_with_400(proxy: EgressProxy, raw: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(60)
        client.connect(str(proxy.socket_path))
        client.sendall(raw)
        client.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 Bad Request"), answer[:80]
    blocked, traffic = proxy.snapshot()
    assert len(blocked) == 1 and blocked[0].command == "pip install thing"
    assert traffic.connections == 0


def test_a_name_that_does_not_resolve_is_refused(proxy: EgressProxy) -> None:
    answer = _ask(proxy, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")  # not in the fake DNS
    assert answer.startswith(b"HTTP/1.1 502")
    assert "resolve" in proxy.snapshot()[0][0].reason


def test_connections_past_the_cap_are_refused(proxy: EgressProxy) -> None:
    idle = []
    try:
        for _ in range(MAX_CONNECTIONS):
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(str(proxy.socket_path))
            idle.append(client)
        deadline = time.monotonic() + 60
        while proxy.active_connections < MAX_CONNECTIONS and time.monotonic() < deadline:
            time.sleep(0.01)  # polls a condition: the proxy accepted every idle connection
        answer = _ask(proxy, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503"), answer[:80]
    finally:
        for client in idle:
            client.close()
