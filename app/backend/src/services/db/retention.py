"""Retention: finished executions older than a number of days are deleted, with all they hold.

:func:`prune_finished` deletes the executions in a final status
(:data:`~services.db.status.FINAL_STATUSES`) that finished (or, lacking that time, were last
updated) before ``now - days``; their journal, tool-call evidence, checkpoints and stored blobs go
with them (foreign keys ``ON DELETE CASCADE``); a flowchart run's node keeps its row with the
execution link cleared. An execution that has not finished is never deleted, however old.
Deletion runs in batches of :data:`BATCH` executions, one transaction each, so a large prune never
holds the database for long. ``STUDIO_RETENTION_DAYS`` is the default number of days
(``studio db prune``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select

from services.db.base import utcnow
from services.db.models import NodeExecution
from services.db.session import Database
from services.db.status import FINAL_STATUSES
from services.execution.errors import ErrorCode, ExecutionError

MIN_DAYS = 1
MAX_DAYS = 36_500
BATCH = 500


@dataclass(frozen=True)
class PruneResult:
    """What a prune deleted (or, with ``dry_run``, would delete)."""

    executions: int
    cutoff: datetime
    dry_run: bool


def check_days(days: object) -> int:
    """``days``, a whole number from ``MIN_DAYS`` to ``MAX_DAYS``; else ``invalid_arguments``."""
    if isinstance(days, bool) or not isinstance(days, int) or not MIN_DAYS <= days <= MAX_DAYS:
        raise ExecutionError(
            f"retention must be a whole number of days from {MIN_DAYS} to {MAX_DAYS}, "
            f"not {days!r}", code=ErrorCode.INVALID_ARGUMENTS, details={"days": repr(days)})
    return days


def prune_finished(db: Database, days: int, *, now: datetime | None = None,
                   dry_run: bool = False) -> PruneResult:
    """Delete the executions finished more than ``days`` days before ``now``."""
    cutoff = (now or utcnow()) - timedelta(days=check_days(days))
    finished_at = func.coalesce(NodeExecution.finished_at, NodeExecution.updated_at)
    old = (select(NodeExecution.id)
           .where(NodeExecution.status.in_([s.value for s in FINAL_STATUSES]),
                  finished_at < cutoff)
           .order_by(NodeExecution.id))
    if dry_run:
        with db.read_session() as session:
            count = session.execute(select(func.count()).select_from(old.subquery())).scalar_one()
        return PruneResult(int(count), cutoff, True)
    deleted = 0
    while True:
        with db.session() as session:
            ids = list(session.scalars(old.limit(BATCH)))
            if ids:
                session.execute(delete(NodeExecution).where(NodeExecution.id.in_(ids)))
        deleted += len(ids)
        if len(ids) < BATCH:
            return PruneResult(deleted, cutoff, False)
