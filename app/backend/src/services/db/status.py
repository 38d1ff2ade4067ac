"""``ExecutionStatus``: the one list of the statuses a node execution goes through.

Lifecycle (``node_executions.status``)::

    QUEUED --> CLAIMED --> RUNNING --> FINALIZING --> SUCCEEDED | FAILED | CANCELLED | STALLED
               (lease      (workspace    (commit,
                taken)      provisioned,  push, PR)
                            the loop)

An attempt that ends with an ``infrastructure`` error goes back to ``QUEUED`` with a
``retry_at``; after the last attempt it is ``DEAD_LETTERED`` until an operator retries it
(``QUEUED``) or discards it (``FAILED``).

A plain run (no repository) goes from ``QUEUED`` to ``RUNNING`` and then to a final status; a
repository run takes every step. An expired lease in an active status (:data:`ACTIVE_STATUSES`)
hands the execution to the reaper, which re-dispatches it; a final status
(:data:`FINAL_STATUSES`) never changes again. The API's list filter, the metrics and the lease
queries all name statuses through this enum.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """Where a node execution is in its lifecycle (the module docstring draws it)."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    FINALIZING = "finalizing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    # paused before a tool call a person must approve; no lease is held (services.runs.approvals)
    AWAITING_APPROVAL = "awaiting_approval"
    # every attempt ended with an infrastructure error: waits for an operator to retry or
    # discard it (services.runs.retries); no lease, never claimed meanwhile
    DEAD_LETTERED = "dead_lettered"


FINAL_STATUSES = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED,
                            ExecutionStatus.CANCELLED, ExecutionStatus.STALLED})
"""Statuses an execution never leaves."""

ACTIVE_STATUSES = frozenset({ExecutionStatus.CLAIMED, ExecutionStatus.RUNNING,
                             ExecutionStatus.FINALIZING})
"""Statuses held under a lease: an expired lease in one of them is the reaper's to re-dispatch."""


#: ``paused_reason`` of an execution its team's concurrency limit keeps queued (a claim refused
#: at the limit: :mod:`services.db.team_admission`); the API shows it as ``waiting_reason``.
TEAM_CONCURRENCY = "team_concurrency"

PARKED_STATUSES = frozenset({ExecutionStatus.DEAD_LETTERED})
"""Statuses no worker takes (not final: an operator's ``retry`` queues the execution again,
``discard`` fails it)."""


def held_by_killswitch(status: str, paused_reason: str | None) -> bool:
    """Whether the kill switch holds the execution back: queued and marked paused
    (:mod:`services.db.pauses`), to resume once the switch is released, not a process that
    died."""
    return (status == ExecutionStatus.QUEUED and paused_reason is not None
            and paused_reason != TEAM_CONCURRENCY)
