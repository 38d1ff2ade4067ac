"""A git smart-HTTP host that refuses every credential (401), or one that never answers.

Stands for a Git hosting service (GitHub) that rejects an expired or revoked token: it answers
each request with ``401 Unauthorized`` and ``WWW-Authenticate: Basic``, and records the
``Authorization`` headers it received so a test can prove the token travelled as a header.
:func:`silent_listener` stands for a host that accepts connections and never replies (to test
timeouts).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class RejectingHost:
    url: str
    authorizations: list[str] = field(default_factory=list)


def _handler(host: RejectingHost) -> type[BaseHTTPRequestHandler]:
    class Reject(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def _reject(self) -> None:
            host.authorizations.append(self.headers.get("Authorization", ""))
            body = b"Bad credentials\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _reject
        do_POST = _reject

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            return

    return Reject


@contextmanager
def rejecting_host() -> Iterator[RejectingHost]:
    """A running rejecting host on 127.0.0.1; ``url`` is a repository URL on it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    host = RejectingHost(url=f"http://127.0.0.1:{server.server_address[1]}/owner/repo.git")
    server.RequestHandlerClass = _handler(host)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def silent_listener() -> Iterator[str]:
    """A URL on 127.0.0.1 whose host accepts connections and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/owner/repo.git"
    finally:
        sock.close()
