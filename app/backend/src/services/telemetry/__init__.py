"""Traces and metrics, in one place.

* :mod:`~services.telemetry.tracing`: OpenTelemetry, on only when an OTLP endpoint is configured;
  off, nothing of OpenTelemetry is imported and a span is a shared no-op object.
* :mod:`~services.telemetry.genai`: the GenAI semantic-convention names the spans use.
* :mod:`~services.telemetry.instrumentation`: the maintained instrumentations (FastAPI, Celery,
  SQLAlchemy), applied where a process starts.
* :mod:`~services.telemetry.metrics`: the Prometheus families (``prometheus_client``), imported
  on first use.
"""
