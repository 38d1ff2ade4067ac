"""The API's ``/metrics``: Prometheus text from ``prometheus_client`` (:mod:`services.telemetry`).

What this process (and, in multiprocess mode, every process writing to the same
``PROMETHEUS_MULTIPROC_DIR``) recorded, then the families read from the database at scrape time
(:class:`~services.telemetry.snapshot.DatabaseSnapshot`).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.db.session import Database
from services.db.status import FINAL_STATUSES as FINAL
from services.db.status import ExecutionStatus
from services.db.triggers import DeliveryStore, SlotStore
from services.settings import metrics_multiprocess_dir
from services.telemetry import metrics
from services.telemetry.snapshot import DatabaseSnapshot
from services.telemetry.trigger_snapshot import TriggerSnapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
EXECUTION_STATUSES = tuple(status.value for status in ExecutionStatus)
FINAL_STATUSES = tuple(status.value for status in ExecutionStatus if status in FINAL)


def exposition(executions: Mapping[str, int], tool_calls: Mapping[str, int],
               triggers: TriggerSnapshot | None = None,
               team_spend_ratio: Mapping[str, float] | None = None,
               oldest: Mapping[str, float] | None = None) -> str:
    snapshot = DatabaseSnapshot(executions, tool_calls, EXECUTION_STATUSES, FINAL_STATUSES,
                                team_spend_ratio=dict(team_spend_ratio or {}),
                                oldest=oldest or {})
    extra = (snapshot,) if triggers is None else (snapshot, triggers)
    return metrics.exposition(metrics_multiprocess_dir(), *extra).decode()


def trigger_snapshot(db: Database) -> TriggerSnapshot:
    """The triggers' families (:mod:`services.telemetry.trigger_snapshot`) as recorded now."""
    return TriggerSnapshot(DeliveryStore(db).counts(), SlotStore(db).state_counts())
