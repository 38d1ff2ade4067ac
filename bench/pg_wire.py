"""A counting proxy for PostgreSQL's wire protocol: the round trips a client makes, and what each
carried.

:class:`CountingProxy` listens on 127.0.0.1 and relays every connection to the server, reading
the messages (protocol 3) that pass. A *round trip* is a request the client sends and then
waits for: it ends with ``Sync`` (the extended protocol: ``Parse``/``Bind``/``Execute``, a
prepared statement's ``Bind``/``Execute``) or is a simple ``Query``, and the server closes it
with ``ReadyForQuery``. A request sent while an earlier one is still unanswered (pipeline mode)
is not a round trip of its own. Each round trip is recorded with its time
(``time.perf_counter``, the system's monotonic clock, comparable across processes) and the
statements it carried (a prepared statement by the text its ``Parse`` gave it).

The client must not negotiate TLS or GSS encryption with the proxy (``sslmode=disable``,
``gssencmode=disable``): the proxy reads plain messages only. It measures; it changes nothing
that passes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

_WAIT_FOR = frozenset(b"SQF")  # Sync, Query, FunctionCall: the client waits for ReadyForQuery


@dataclass(frozen=True)
class RoundTrip:
    at: float
    statements: tuple[str, ...]


@dataclass
class _Connection:
    """One client connection's state: the statements named by ``Parse``, what waits."""

    prepared: dict[str, str] = field(default_factory=dict)
    batch: list[str] = field(default_factory=list)
    outstanding: int = 0
    started: bool = False
    last_trip: int = -1  # the index of this connection's last round trip


class CountingProxy:
    """``with CountingProxy() as proxy:`` then connect to ``proxy.port``; ``proxy.trips``."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.trips: list[RoundTrip] = []
        self.connections = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> CountingProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._listener.close()

    def between(self, start: float, end: float) -> list[RoundTrip]:
        with self._lock:
            return [t for t in self.trips if start <= t.at < end]

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            state = _Connection()
            with self._lock:
                self.connections += 1
            self._spawn(self._pump, client, server, state, True)
            self._spawn(self._pump, server, client, state, False)

    def _pump(self, source: socket.socket, sink: socket.socket, state: _Connection,
              from_client: bool) -> None:
        buffer = b""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                buffer += data
                buffer = self._read(buffer, state, from_client)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _read(self, buffer: bytes, state: _Connection, from_client: bool) -> bytes:
        """Account for every whole message in ``buffer``; answers what is left of it."""
        while True:
            if from_client and not state.started:  # the startup message: no type byte
                if len(buffer) < 4:
                    return buffer
                (length,) = struct.unpack("!i", buffer[:4])
                if len(buffer) < length:
                    return buffer
                buffer, state.started = buffer[length:], True
                continue
            if len(buffer) < 5:
                return buffer
            kind = buffer[0]
            (length,) = struct.unpack("!i", buffer[1:5])
            if len(buffer) < 1 + length:
                return buffer
            body, buffer = buffer[5:1 + length], buffer[1 + length:]
            with self._lock:
                if from_client:
                    self._client_message(kind, body, state)
                elif kind == ord("Z"):
                    state.outstanding = max(0, state.outstanding - 1)

    def _client_message(self, kind: int, body: bytes, state: _Connection) -> None:
        if kind == ord("P"):  # Parse: name \0 query \0 ...
            name, rest = body.split(b"\0", 1)
            query = rest.split(b"\0", 1)[0].decode(errors="replace")
            if name:
                state.prepared[name.decode()] = query
            state.batch.append(query)
        elif kind == ord("B"):  # Bind: portal \0 statement \0 ...
            statement = body.split(b"\0", 2)[1].decode(errors="replace")
            if statement and (not state.batch or state.batch[-1] !=
                              state.prepared.get(statement)):
                state.batch.append(state.prepared.get(statement, f"<prepared {statement}>"))
        elif kind == ord("Q"):
            state.batch.append(body.rstrip(b"\0").decode(errors="replace"))
        if kind in _WAIT_FOR:
            if state.outstanding == 0 or state.last_trip < 0:
                self.trips.append(RoundTrip(time.perf_counter(), tuple(state.batch)))
                state.last_trip = len(self.trips) - 1
            else:  # pipelined behind an unanswered request: the same round trip
                last = self.trips[state.last_trip]
                self.trips[state.last_trip] = RoundTrip(last.at,
                                                        last.statements + tuple(state.batch))
            state.batch = []
            state.outstanding += 1


def classify(statement: str) -> str:
    """A short name for what a statement is, for the per-step breakdown."""
    text = " ".join(statement.split())
    upper = text.upper()
    if "STUDIO_JOURNAL_COMMIT" in upper:
        return "journal commit (studio_journal_commit)"
    if upper in ("BEGIN", "COMMIT", "ROLLBACK", "SELECT 1", ";", ""):
        return {"SELECT 1": "ping (SELECT 1)", ";": "ping (empty query)",
                "": "ping (empty query)"}.get(upper, upper)
    if upper.startswith("SELECT"):
        tables = [w for w in ("node_executions", "runtime_settings", "budget_ledger",
                              "team_spend", "teams", "tool_calls", "execution_events")
                  if w.upper() in upper]
        return "SELECT " + ",".join(tables[:3])
    words = upper.split()
    table = next((w for w in words[1:4] if w not in ("INTO", "FROM")), "")
    return f"{words[0]} {table.lower()}"
