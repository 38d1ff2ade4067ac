"""A local receiver of team budget alerts: stands for a team's notification endpoint (a chat
webhook, an incident tool) that the studio POSTs signed JSON to.

Served by the stdlib on 127.0.0.1 (port chosen by the OS). Every POST is kept as a
:class:`ReceivedAlert` (path, headers, raw body); the first ``fail_first`` POSTs are answered
500 (to see the retries), every later one 204.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class ReceivedAlert:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int


@dataclass
class AlertReceiver:
    url: str
    fail_first: int = 0
    received: list[ReceivedAlert] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_for(self, done: Callable[[list[ReceivedAlert]], bool],
                 timeout: float = 60) -> list[ReceivedAlert]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                seen = list(self.received)
            if done(seen):
                return seen
            time.sleep(0.05)
        raise AssertionError(f"the receiver did not see what was awaited: {seen}")


@contextmanager
def alert_receiver(fail_first: int = 0) -> Iterator[AlertReceiver]:
    receiver = AlertReceiver(url="", fail_first=fail_first)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 1_000_000))
            with receiver.lock:
                status = 500 if len(receiver.received) < receiver.fail_first else 204
                receiver.received.append(ReceivedAlert(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/studio"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
