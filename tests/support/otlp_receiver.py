"""A local OTLP/HTTP trace receiver: stands for an OpenTelemetry Collector (or any backend that
accepts OTLP over HTTP, Jaeger, Tempo, Honeycomb...).

Served by the stdlib on 127.0.0.1 (port chosen by the OS). ``POST /v1/traces`` takes an
``ExportTraceServiceRequest`` in protobuf (``Content-Type: application/x-protobuf``, gzip or not),
decoded with the maintained ``opentelemetry-proto`` package, and answers an empty
``ExportTraceServiceResponse``; anything else gets a 404 and lands in ``unmatched``. Every span is
kept as a :class:`ReceivedSpan` with its resource's ``service.name``.

Usage::

    with otlp_receiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        ...
        spans = receiver.wait_for(lambda spans: any(s.name == "x" for s in spans))
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    service: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id)
    status_code: int = 0


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items if isinstance(item, KeyValue)}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one protobuf ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(ReceivedSpan(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(), name=span.name, kind=span.kind,
                    service=service, attributes=_attributes(span.attributes),
                    events=[(e.name, _attributes(e.attributes)) for e in span.events],
                    links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                    status_code=span.status.code))
    return found


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.unmatched: list[str] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/") != "/v1/traces":
                    receiver.unmatched.append(f"POST {self.path}")
                    self.send_error(404)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                spans = decode(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, done: Callable[[list[ReceivedSpan]], bool],
                 timeout: float = 60) -> list[ReceivedSpan]:
        """The spans received once ``done`` holds for them (an AssertionError after
        ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.snapshot()
            if done(spans):
                return spans
            time.sleep(0.2)
        names = sorted({f"{s.service}:{s.name}" for s in self.snapshot()})
        raise AssertionError(f"the expected spans did not arrive; received: {names}")


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
