"""The broker's client library (redis-py), imported without OpenTelemetry's metrics SDK.

redis-py 8's package imports ``redis.observability.providers``, which imports
``opentelemetry.sdk.metrics`` only to note whether it is installed (a module constant nothing
reads; its metrics, when an application turns them on, import what they use when they start):
61 modules and about 2 MB of the worker's memory that nothing of Studio uses (issue 39,
:doc:`benchmarks`). :func:`import_broker_client` imports redis-py with that one import refused,
then lets any later import of the SDK through as usual (the tracing of ``--metrics-port`` and
``OTEL_*`` import what they need when they start).
"""

from __future__ import annotations

import importlib
import sys

METRICS_SDK = "opentelemetry.sdk.metrics"


def import_broker_client() -> None:
    """Import ``redis`` (what Celery's Redis transport imports) without :data:`METRICS_SDK`,
    unless either is already imported (then there is nothing to spare)."""
    if "redis" in sys.modules or METRICS_SDK in sys.modules:
        return
    sys.modules[METRICS_SDK] = None  # type: ignore[assignment]  # an import of it fails
    try:
        importlib.import_module("redis")
    finally:
        del sys.modules[METRICS_SDK]
