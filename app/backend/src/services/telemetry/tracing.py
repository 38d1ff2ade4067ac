"""Spans for the engine and the durable path, exported over OTLP/HTTP when configured.

:func:`configure` (called where a process starts: ``studio api``, ``studio worker``, ``studio
execute``, ``studio run``) sets up the OpenTelemetry SDK with the OTLP/HTTP exporter when
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; the SDK reads
the other ``OTEL_*`` variables itself (service name, resource attributes, sampler, batching).
Without an endpoint nothing is set up and nothing of OpenTelemetry is imported: :func:`span`
yields :data:`NO_SPAN`, whose methods do nothing.

The trace context crosses processes as W3C ``traceparent``: in a Celery message's headers (the
Celery instrumentation), and in ``TRACEPARENT`` for ``studio execute`` (:func:`environment`,
:func:`inherited`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue]


class SpanLike(Protocol):
    """What the code that records a span uses of it (an OpenTelemetry span, or :data:`NO_SPAN`)."""

    def set_attribute(self, key: str, value: AttributeValue) -> None: ...

    def add_event(self, name: str, attributes: Attributes | None = None) -> None: ...


class _NoSpan:
    def set_attribute(self, key: str, value: AttributeValue) -> None:
        return None

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        return None


NO_SPAN = _NoSpan()
_tracer: Tracer | None = None
TRACER_NAME = "studio"


def enabled() -> bool:
    """Whether spans are recorded in this process."""
    return _tracer is not None


def configure(service_name: str, *, endpoint_set: bool, name_set: bool) -> bool:
    """Set up the SDK once (``endpoint_set``: an OTLP endpoint is configured; ``name_set``: the
    operator named the service, else it is ``service_name``). Answers whether tracing is on."""
    global _tracer
    if _tracer is not None or not endpoint_set:
        return _tracer is not None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({} if name_set else {"service.name": service_name})
    provider = TracerProvider(resource=resource)  # sampler: OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _tracer = trace.get_tracer(TRACER_NAME)
    return True


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered now (before a process ends abruptly)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()
    provider.force_flush(timeout_ms)


@contextmanager
def span(name: str, attributes: Attributes | None = None, *, kind: str = "internal",
         links: Sequence[str] = (), start_time_ns: int | None = None) -> Iterator[SpanLike]:
    """A span around the block, current inside it (an exception is recorded and sets the error
    status); ``links``: ``traceparent`` values of related spans (an earlier attempt)."""
    if _tracer is None:
        yield NO_SPAN
        return
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(
            name, attributes=attributes, kind=SpanKind[kind.upper()],
            links=_links(links), start_time=start_time_ns) as current:
        yield current


def _links(traceparents: Sequence[str]) -> list[Any]:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    found = []
    for value in traceparents:
        context = TraceContextTextMapPropagator().extract({"traceparent": value})
        linked = trace.get_current_span(context).get_span_context()
        if linked.is_valid:
            found.append(trace.Link(linked))
    return found


def annotate(attributes: Attributes) -> None:
    """Set ``attributes`` on the current span (an API request's server span, say)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(attributes)


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span (none when off or outside any span)."""
    return carrier().get("traceparent")


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (``traceparent``, ``tracestate``)."""
    if _tracer is None:
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers


def environment() -> dict[str, str]:
    """``TRACEPARENT`` / ``TRACESTATE`` for a process started inside the current span."""
    return {name.upper(): value for name, value in carrier().items()
            if name in ("traceparent", "tracestate")}


@contextmanager
def inherited(headers: Mapping[str, str]) -> Iterator[None]:
    """The block runs in the trace context ``headers`` carry (a ``traceparent`` from the
    process that started this one); nothing to do when off or when there is none."""
    if _tracer is None or not headers:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(dict(headers)))
    try:
        yield
    finally:
        context.detach(token)
