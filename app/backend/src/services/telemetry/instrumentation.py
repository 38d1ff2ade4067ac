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
    """Statement spans for ``engine`` (a SQLAlchemy engine)."""
    if not tracing.enabled():
        return
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    SQLAlchemyInstrumentor().instrument(engine=engine, enable_commenter=False)
