"""The API's ``/metrics``: Prometheus text from ``prometheus_client`` (:mod:`services.telemetry`).

What this process (and, in multiprocess mode, every process writing to the same
``PROMETHEUS_MULTIPROC_DIR``) recorded, then the families read from the database at scrape time
(:class:`~services.telemetry.snapshot.DatabaseSnapshot`).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.db.status import FINAL_STATUSES as FINAL
from services.db.status import ExecutionStatus
from services.settings import metrics_multiprocess_dir
from services.telemetry import metrics
from services.telemetry.snapshot import DatabaseSnapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
EXECUTION_STATUSES = tuple(status.value for status in ExecutionStatus)
FINAL_STATUSES = tuple(status.value for status in ExecutionStatus if status in FINAL)


def exposition(executions: Mapping[str, int], tool_calls: Mapping[str, int],
               oldest: Mapping[str, float] | None = None) -> str:
    snapshot = DatabaseSnapshot(executions, tool_calls, EXECUTION_STATUSES, FINAL_STATUSES,
                                oldest or {})
    return metrics.exposition(metrics_multiprocess_dir(), snapshot).decode()
