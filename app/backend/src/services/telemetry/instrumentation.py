"""The maintained OpenTelemetry instrumentations, applied only when tracing is on.

* FastAPI (``opentelemetry-instrumentation-fastapi``): one server span per API request, the
  W3C context of an incoming ``traceparent`` honoured;
* Celery (``opentelemetry-instrumentation-celery``): the producer puts the current context in the
  message's headers and the worker's task runs under it (``apply_async``/``run`` spans);
* SQLAlchemy (``opentelemetry-instrumentation-sqlalchemy``): one span per statement (the
  statement text, never its parameters).

The HTTP client the provider SDKs use (``httpx2``) has no maintained instrumentation; the model
calls are the GenAI ``chat`` spans of the engine instead.
"""

from __future__ import annotations

from typing import Any

from services.telemetry import tracing


def instrument_fastapi(app: Any) -> None:
    """Server spans for ``app`` (a FastAPI application); nothing when tracing is off."""
    if not tracing.enabled():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")


def instrument_celery() -> None:
    """Context propagation through Celery messages, in a producer or a worker process (a
    prefork pool process calls it at its start)."""
    if not tracing.enabled():
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()


def instrument_sqlalchemy(engine: Any) -> None:
    """Statement spans for ``engine`` (a SQLAlchemy engine). The instrumentation's own tracer,
    attached to each engine (a process opens several: the instrumentor's ``instrument()``
    would trace the first one only)."""
    if not tracing.enabled():
        return
    from opentelemetry import metrics, trace
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer

    scope = "opentelemetry.instrumentation.sqlalchemy"
    usage = metrics.get_meter(scope).create_up_down_counter(
        "db.client.connections.usage", unit="connections")
    EngineTracer(trace.get_tracer(scope), engine, usage, False, {})  # type: ignore[no-untyped-call]
