"""Whether a delivered ``studio.execute_node`` task should start the execution at all.

Celery delivers a message at least once (``acks_late``: a worker that dies mid-task leaves its
message to be delivered again, and the reaper may dispatch the same execution too). So a task
looks at the execution first:

* no such execution: nothing to do (logged);
* already in a final status: an earlier delivery finished it; the task is a no-op;
* a live lease (its expiry is in the future): another process is running it right now; the
  redelivered message is ignored, not failed (the lease holder, or the reaper once the lease
  expires, carries the execution on);
* waiting for an approval (``awaiting_approval``): a decision queues and dispatches it again;
  until then the delivery is a no-op;
* otherwise (queued, or a lease that expired): run it. Two deliveries racing past this check
  are settled by the lease itself: only one ``studio execute`` can claim it, the other's claim
  fails and it exits.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from services.db.status import FINAL_STATUSES, ExecutionStatus


class Admission(StrEnum):
    RUN = "run"
    UNKNOWN = "unknown"
    FINISHED = "finished"
    LEASE_HELD = "lease_held"
    AWAITING_APPROVAL = "awaiting_approval"
    TEAM_CONCURRENCY = "team_concurrency"  # its team is at its limit: it waits, queued


class ExecutionState(Protocol):
    """The columns the decision reads (a ``NodeExecution`` row has them)."""

    @property
    def status(self) -> str: ...

    @property
    def lease_expires_at(self) -> datetime | None: ...


def admit(row: ExecutionState | None, now: datetime | None = None) -> Admission:
    """The decision for one delivery (see the module docstring)."""
    if row is None:
        return Admission.UNKNOWN
    if row.status in FINAL_STATUSES:
        return Admission.FINISHED
    if row.status == ExecutionStatus.AWAITING_APPROVAL:
        return Admission.AWAITING_APPROVAL
    now = now or datetime.now(UTC)
    expires = row.lease_expires_at
    if expires is not None and _aware(expires) > now:
        return Admission.LEASE_HELD
    return Admission.RUN


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
