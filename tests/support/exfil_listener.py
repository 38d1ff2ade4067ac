"""The attacker's servers: a TCP listener and a UDP socket that record every byte sent to them.

They stand for a host on the network that a hostile model or repository wants a secret sent to
(the security tests' witnesses): the TCP listener accepts a proxy client's ``CONNECT`` (so the
request sent through the tunnel arrives too), answers each request with an HTTP 400 (not
retried) and closes the connection, and keeps what it received; the UDP socket keeps every
datagram. ``received()`` is everything so far, as one byte string.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self


class _Witness:
    """What both witnesses share: the bytes received so far, and closing the socket."""

    sock: socket.socket

    def __init__(self) -> None:
        self._data = bytearray()
        self._lock = threading.Lock()

    def received(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked on the socket
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class TcpWitness(_Witness):
    """A TCP listener on ``host:port`` (``port`` 0: an ephemeral one) recording what arrives."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.host, self.port = self.sock.getsockname()[:2]
        self.connections = 0
        super().__init__()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        conn.settimeout(5)
        with conn:
            with contextlib.suppress(OSError):
                head = self._head(conn)
                if head.startswith(b"CONNECT "):  # a proxy client: the tunnel, then its request
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    self._head(conn)
            with contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 400 Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def _head(self, conn: socket.socket) -> bytes:
        """Bytes up to the end of a request head (or the connection's end), recorded."""
        seen = bytearray()
        while b"\r\n\r\n" not in seen and len(seen) < 1_000_000:
            chunk = conn.recv(65536)
            if not chunk:
                break
            seen += chunk
            with self._lock:
                self._data += chunk
        return bytes(seen)



class UdpWitness(_Witness):
    """A UDP socket on ``host:port`` recording every datagram."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        super().__init__()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                data, _ = self.sock.recvfrom(65536)
            except OSError:
                return
            with self._lock:
                self._data += data
