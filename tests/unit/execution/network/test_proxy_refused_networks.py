"""The egress proxy, over its unix socket, with an allowed name that resolves to an address in a
row of the table of refused networks: it is refused (403, recorded with the command) before any
connection is tried. The control: the same name answering a pinned loopback listener is reached,
so a refusal here is the table's doing, not a proxy that reaches nothing."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.execution.network.allowlist import parse_allowlist
from services.execution.network.proxy import EgressProxy


class _Seen(socketserver.BaseRequestHandler):
    """The listener a refused connection would have reached: it counts what reaches it."""

    hits: list[bytes] = []

    def handle(self) -> None:
        self.hits.append(self.request.recv(65536))
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nseen")


@pytest.fixture
def listener() -> Iterator[int]:
    _Seen.hits = []
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Seen)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


class Dns:
    """Stands for DNS: one allowed name, answering whatever the test sets."""

    def __init__(self) -> None:
        self.answer: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        if host != "index.test":
            raise OSError("no such name")
        return self.answer


@pytest.fixture
def dns() -> Dns:
    return Dns()


@pytest.fixture
def proxy(tmp_path: Path, listener: int, dns: Dns) -> Iterator[EgressProxy]:
    policy = parse_allowlist([f"index.test:{listener}", f"127.0.0.1:{listener}"],
                             addresses=True)
    running = EgressProxy(policy, tmp_path / "proxy.sock", resolver=dns)
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


@pytest.mark.parametrize("answer", [
    "fec0::1",                  # site-local (deprecated): Python calls it global
    "fec0::a9fe:a9fe",
    "fd00:ec2::254",            # unique local: AWS metadata over IPv6
    "100.64.0.1",               # shared address space
    "::127.0.0.1",              # IPv4-compatible loopback
    "2002:7f00:1::1",           # 6to4 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",       # NAT64 of the metadata service
    "64:ff9b:1::1",             # local-use NAT64
    "169.254.169.254",
])
def test_a_name_resolving_into_a_refused_network_is_never_connected(
        proxy: EgressProxy, dns: Dns, listener: int, answer: str) -> None:
    dns.answer = [answer]
    reply = _ask(proxy, f"CONNECT index.test:{listener} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
                 .encode())
    assert reply.startswith(b"HTTP/1.1 403 Forbidden"), reply[:80]
    blocked, traffic = proxy.snapshot()
    assert [(b.host, b.command) for b in blocked] == [("index.test", "pip install thing")]
    assert "may not be reached" in blocked[0].reason  # not a failed connection attempt
    assert traffic.connections == 0 and _Seen.hits == []


def test_the_control_a_refused_answer_then_a_pinned_one_reaches_the_pinned(
        proxy: EgressProxy, dns: Dns, listener: int) -> None:
    dns.answer = ["fec0::1", "127.0.0.1"]  # the refused one first: skipped, never tried
    reply = _ask(proxy, f"CONNECT index.test:{listener} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
                 .encode())
    assert reply.startswith(b"HTTP/1.1 200 Connection established"), reply[:80]
    assert reply.endswith(b"seen") and len(_Seen.hits) == 1
    blocked, traffic = proxy.snapshot()
    assert blocked == [] and traffic.connections == 1
