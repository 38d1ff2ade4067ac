"""Where a command turns telemetry on: traces when an OTLP endpoint is configured, metrics in
multiprocess mode for a process whose children record too."""

from __future__ import annotations


def start_tracing(service_name: str) -> bool:
    """Set up tracing for this process (``service_name`` unless ``OTEL_SERVICE_NAME`` says
    otherwise); answers whether it is on. Off, nothing of OpenTelemetry is imported."""
    from services.settings import service_name_configured, tracing_configured
    from services.telemetry import tracing

    return tracing.configure(service_name, endpoint_set=tracing_configured(),
                             name_set=service_name_configured())


def shared_metrics_dir() -> str:
    """Record metrics in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, else a fresh directory
    that the children started from here inherit); answers the directory."""
    from services.settings import metrics_multiprocess_dir
    from services.telemetry.metrics import use_multiprocess_dir

    return use_multiprocess_dir(metrics_multiprocess_dir())
